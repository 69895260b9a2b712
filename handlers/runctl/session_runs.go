package runctl

import (
	"context"
	"errors"
	"fmt"
	"slices"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/kvcas"
	"github.com/agentbus/agentbus/orch"
)

// BucketSessionRuns orders each session's runs (SessionRuns): under
// <tenant>.<session> the run in flight and the runs queued behind it, and
// under <tenant>.<session>.<run_id> each queued run's request.
const BucketSessionRuns = "session_runs"

// MaxSessionQueue bounds the runs one session queues. Past it a run starts
// at once, out of order (logged), rather than being refused.
const MaxSessionQueue = 100

// SessionRuns runs a session's runs one at a time, in the order they
// arrived (seed 002: ordered processing per conversation): a run that
// arrives while another of its session is in flight is queued, and each
// run's end starts the next. Runs of different sessions run in parallel.
// Every change is a compare-and-swap on the session's entry, so any number
// of routers agree. A nil SessionRuns queues nothing.
type SessionRuns struct {
	KV jetstream.KeyValue
}

// sessionRunsEntry is a session's run in flight and its queue of run ids,
// oldest first.
type sessionRunsEntry struct {
	Active string   `json:"active,omitempty"`
	Queue  []string `json:"queue,omitempty"`
}

// Queued says why a run waits: its place in its session's queue (1 is
// next) and the run in flight.
type Queued struct {
	Position int    `json:"position"`
	Behind   string `json:"behind"`
}

func sessionRunsKey(tenant, session string) string { return tenant + "." + session }

func queuedRunKey(req orch.RunRequest) string {
	return sessionRunsKey(req.TenantID, req.SessionID) + "." + req.RunID
}

// Admit reports whether req's run may start now: it is (or becomes) its
// session's run in flight. Otherwise the run is queued, its request kept
// until its turn, and Admit says where it waits. Admitting a run again
// (a redelivered request) answers the same.
func (s *SessionRuns) Admit(ctx context.Context, req orch.RunRequest) (*Queued, error) {
	if s == nil || s.KV == nil {
		return nil, nil
	}
	var queued *Queued
	kept, dequeued := false, false
	_, err := kvcas.Update(ctx, s.KV, sessionRunsKey(req.TenantID, req.SessionID), func(e *sessionRunsEntry, _ uint64) (bool, error) {
		queued, dequeued = nil, false
		i := slices.Index(e.Queue, req.RunID)
		switch {
		case e.Active == req.RunID:
			return false, nil
		case e.Active == "" && (len(e.Queue) == 0 || i == 0):
			// Free, and nobody is ahead of it: it starts.
			e.Active = req.RunID
			if i == 0 {
				e.Queue, dequeued = e.Queue[1:], true
			}
			return true, nil
		case i >= 0:
			queued = &Queued{Position: i + 1, Behind: e.Active}
			return false, nil
		case len(e.Queue) >= MaxSessionQueue:
			return false, ErrSessionQueueFull
		}
		if !kept {
			// The request is stored before the queue names it, so that
			// the run that frees the session finds it.
			b, err := json.Marshal(req)
			if err != nil {
				return false, err
			}
			if _, err := s.KV.Put(ctx, queuedRunKey(req), b); err != nil {
				return false, fmt.Errorf("handlers: queue run %s: %w", req.RunID, err)
			}
			kept = true
		}
		e.Queue = append(e.Queue, req.RunID)
		queued = &Queued{Position: len(e.Queue), Behind: e.Active}
		return true, nil
	})
	if errors.Is(err, ErrSessionQueueFull) {
		return nil, err
	}
	if err == nil && queued == nil && (kept || dequeued) {
		// It starts: the request it was kept by (while it waited, or by
		// an attempt whose write lost a race) is not needed any more.
		_ = s.KV.Purge(ctx, queuedRunKey(req))
	}
	return queued, err
}

var ErrSessionQueueFull = errors.New("handlers: the session's queue is full")

// Next ends req's run (its tenant, session and run id are all it reads)
// in its session and returns the request of the run
// whose turn it now is, if any, for the caller to submit again. It returns
// it as long as that run has not started (a redelivered end submits it
// again, under the same id), and nil once another run is in flight.
func (s *SessionRuns) Next(ctx context.Context, req orch.RunRequest) (*orch.RunRequest, error) {
	if s == nil || s.KV == nil {
		return nil, nil
	}
	key := sessionRunsKey(req.TenantID, req.SessionID)
	var lost string // a queued run whose request is gone
	for {
		var head string
		_, err := kvcas.Update(ctx, s.KV, key, func(e *sessionRunsEntry, _ uint64) (bool, error) {
			head = ""
			write := false
			if e.Active == req.RunID {
				e.Active, write = "", true
			}
			// An ended run waits no more (one ended while queued: its
			// request dead-lettered), nor does one nothing can start.
			for _, gone := range []string{req.RunID, lost} {
				if i := slices.Index(e.Queue, gone); gone != "" && i >= 0 {
					e.Queue, write = slices.Delete(slices.Clone(e.Queue), i, i+1), true
				}
			}
			if e.Active == "" && len(e.Queue) > 0 {
				head = e.Queue[0]
			}
			return write, nil
		})
		if err != nil || head == "" {
			return nil, err
		}
		next := req
		next.RunID = head
		entry, err := s.KV.Get(ctx, queuedRunKey(next))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			// Nothing can start it (its entry expired): it leaves the
			// queue rather than hold the session.
			lost = head
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("handlers: queued run %s: %w", head, err)
		}
		var r orch.RunRequest
		if err := json.Unmarshal(entry.Value(), &r); err != nil {
			return nil, fmt.Errorf("handlers: queued run %s: %w", head, err)
		}
		return &r, nil
	}
}
