package chaos

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/orch"
)

// watcher follows agent.run.requested.* and agent.run.finished.* in the
// AGENT stream by sequence number. It reads the stored stream, not a
// subscription, so it misses nothing across NATS restarts: a run is lost
// exactly when the stream holds no run.finished for it.
type watcher struct {
	js jetstream.JetStream

	mu       sync.Mutex
	next     uint64
	passes   uint64        // completed scans that reached the end of the stream
	passed   chan struct{} // closed and replaced at every completed scan
	sessions map[string][]string
	finished map[string][]orch.RunResult
	waiters  map[string][]chan struct{}
	bad      int // messages that did not decode
}

func newWatcher(js jetstream.JetStream) *watcher {
	return &watcher{js: js, next: 1, passed: make(chan struct{}), sessions: map[string][]string{},
		finished: map[string][]orch.RunResult{}, waiters: map[string][]chan struct{}{}}
}

const runSubjects = "agent.run.>"

// run reads the stream until ctx ends.
func (w *watcher) run(ctx context.Context) {
	var stream jetstream.Stream
	for ctx.Err() == nil {
		if stream == nil {
			s, err := w.js.Stream(ctx, events.StreamAgent)
			if err != nil {
				_ = sleep(ctx, 200*time.Millisecond)
				continue
			}
			stream = s
		}
		w.mu.Lock()
		next := w.next
		w.mu.Unlock()
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		msg, err := stream.GetMsg(rctx, next, jetstream.WithGetMsgSubject(runSubjects))
		cancel()
		switch {
		case err == nil:
			w.add(msg)
		case errors.Is(err, jetstream.ErrMsgNotFound):
			w.mu.Lock()
			w.passes++
			close(w.passed)
			w.passed = make(chan struct{})
			w.mu.Unlock()
			_ = sleep(ctx, 100*time.Millisecond)
		default:
			_ = sleep(ctx, 200*time.Millisecond)
		}
	}
}

func (w *watcher) add(msg *jetstream.RawStreamMsg) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.next = msg.Sequence + 1
	ev, err := events.FromMsg(msg.Header, msg.Data)
	if err != nil {
		w.bad++
		return
	}
	switch {
	case strings.HasPrefix(msg.Subject, "agent.run.requested."):
		var req orch.RunRequest
		if events.Decode(ev, &req) != nil {
			w.bad++
			return
		}
		// A run queued behind another of its session is requested
		// again when its turn comes: it is one run.
		if !slices.Contains(w.sessions[req.SessionID], req.RunID) {
			w.sessions[req.SessionID] = append(w.sessions[req.SessionID], req.RunID)
		}
	case strings.HasPrefix(msg.Subject, "agent.run.finished."):
		var res orch.RunResult
		if events.Decode(ev, &res) != nil {
			w.bad++
			return
		}
		w.finished[res.RunID] = append(w.finished[res.RunID], res)
		for _, ch := range w.waiters[res.RunID] {
			close(ch)
		}
		delete(w.waiters, res.RunID)
	}
}

// catchUp returns once the watcher has read everything stored before the
// call: a scan to the end of the stream that started after the call.
func (w *watcher) catchUp(ctx context.Context) error {
	for range 2 {
		w.mu.Lock()
		ch := w.passed
		w.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// runsOf returns the run ids requested with session.
func (w *watcher) runsOf(session string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.sessions[session]...)
}

// results returns the run.finished results of runID.
func (w *watcher) results(runID string) []orch.RunResult {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]orch.RunResult(nil), w.finished[runID]...)
}

// waitFinished waits until runID has a run.finished, ctx ends or timeout
// passes; it reports whether the run finished. It serves the runs an
// ambiguous POST adopts: they may have finished before they are awaited,
// which the watcher's record shows and a runclient waiter would miss.
func (w *watcher) waitFinished(ctx context.Context, runID string, timeout time.Duration) bool {
	w.mu.Lock()
	if len(w.finished[runID]) > 0 {
		w.mu.Unlock()
		return true
	}
	ch := make(chan struct{})
	w.waiters[runID] = append(w.waiters[runID], ch)
	w.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// countSubject counts the stored messages on subject (wildcards allowed)
// by reading them, retrying through NATS outages until ctx ends.
func countSubject(ctx context.Context, js jetstream.JetStream, subject string) (int, error) {
	n, seq := 0, uint64(1)
	for {
		stream, err := js.Stream(ctx, events.StreamAgent)
		if err == nil {
			var msg *jetstream.RawStreamMsg
			msg, err = stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				return n, nil
			}
			if err == nil {
				n++
				seq = msg.Sequence + 1
				continue
			}
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return n, err
		}
	}
}
