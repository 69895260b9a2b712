package events

import (
	"sync"
	"time"
)

// keptIdle is how long a kept goroutine waits for more work before it
// ends.
const keptIdle = 30 * time.Second

// keptGoroutines runs functions on goroutines it keeps for the next
// function once they are done. A trail's handler decodes and encodes
// JSON deep enough to grow a new goroutine's stack several times over
// (with a goroutine per message, 1.3 s of the projector's 8.9 s in a c64
// make bench profile was spent growing stacks); a kept goroutine's stack
// has already grown. It bounds nothing: a function handed over while
// every kept goroutine is busy starts one more, so functions that wait
// for each other never wait for a goroutine. A kept goroutine ends when
// it has been idle for keptIdle, or once stop is called.
type keptGoroutines struct {
	tasks chan func()
	quit  chan struct{}
}

func newKeptGoroutines() *keptGoroutines {
	return &keptGoroutines{tasks: make(chan func()), quit: make(chan struct{})}
}

// Go runs f on an idle kept goroutine, or on a new one, counted by wg as
// WaitGroup.Go counts its own.
func (k *keptGoroutines) Go(wg *sync.WaitGroup, f func()) {
	wg.Add(1)
	task := func() {
		defer wg.Done()
		f()
	}
	select {
	case k.tasks <- task: // an idle goroutine was waiting
	default:
		go k.keep(task)
	}
}

// keep runs task, then each task handed to it, until it has waited
// keptIdle for one or stop was called.
func (k *keptGoroutines) keep(task func()) {
	idle := time.NewTimer(keptIdle)
	defer idle.Stop()
	for {
		task()
		idle.Reset(keptIdle)
		select {
		case task = <-k.tasks:
		case <-idle.C:
			return
		case <-k.quit:
			return
		}
	}
}

// stop ends the idle goroutines, and each busy one once its function
// returns. A function handed over after stop still runs.
func (k *keptGoroutines) stop() { close(k.quit) }
