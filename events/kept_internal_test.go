package events

import (
	"bytes"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

// goroutineID is the id of the calling goroutine, read from its stack
// trace's first line ("goroutine 7 [running]:").
func goroutineID(t *testing.T) int {
	var buf [64]byte
	line := buf[:runtime.Stack(buf[:], false)]
	line = bytes.TrimPrefix(line, []byte("goroutine "))
	id, err := strconv.Atoi(string(line[:bytes.IndexByte(line, ' ')]))
	if err != nil {
		t.Errorf("goroutine id: %v", err)
	}
	return id
}

func TestKeptGoroutinesRunTheNextFunctionOnAnIdleOne(t *testing.T) {
	k := newKeptGoroutines()
	defer k.stop()
	ids := map[int]bool{}
	for range 20 {
		var wg sync.WaitGroup
		var id int
		k.Go(&wg, func() { id = goroutineID(t) })
		wg.Wait()
		ids[id] = true
		time.Sleep(10 * time.Millisecond) // time for the goroutine to wait again
	}
	// One goroutine; a second or third only if a loaded machine had not
	// yet scheduled the first back to its wait when the next came.
	if len(ids) > 3 {
		t.Fatalf("20 functions one after another ran on %d goroutines, want 1 (at most 3)", len(ids))
	}
}

func TestKeptGoroutinesNeverMakeAFunctionWait(t *testing.T) {
	k := newKeptGoroutines()
	defer k.stop()
	// Keep a few idle ones first, then hand over more functions than
	// there are kept goroutines, each of which returns only once all have
	// started: a bound would leave them waiting for ever.
	var warm sync.WaitGroup
	for range 3 {
		k.Go(&warm, func() {})
	}
	warm.Wait()
	const n = 50
	var wg sync.WaitGroup
	started := make(chan struct{}, n)
	all := make(chan struct{})
	for range n {
		k.Go(&wg, func() {
			started <- struct{}{}
			<-all
		})
	}
	for range n {
		select {
		case <-started:
		case <-time.After(5 * time.Second):
			t.Fatal("a function handed over never started")
		}
	}
	close(all)
	wg.Wait()
}

func TestKeptGoroutinesEndOnStop(t *testing.T) {
	before := runtime.NumGoroutine()
	k := newKeptGoroutines()
	var wg sync.WaitGroup
	release := make(chan struct{})
	for range 8 {
		k.Go(&wg, func() { <-release })
	}
	close(release)
	wg.Wait()
	k.stop()
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before; {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after stop, %d before the first function", runtime.NumGoroutine(), before)
		}
		time.Sleep(time.Millisecond)
	}
	ran := false
	k.Go(&wg, func() { ran = true }) // after stop, on a goroutine of its own
	wg.Wait()
	if !ran {
		t.Fatal("a function handed over after stop did not run")
	}
}
