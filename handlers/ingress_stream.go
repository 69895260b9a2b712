package handlers

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
)

// sseWriter serialises writes to one SSE response.
type sseWriter struct {
	mu     sync.Mutex
	w      http.ResponseWriter
	f      http.Flusher
	n      int
	closed bool
	subs   []*nats.Subscription
}

func (s *sseWriter) send(c runclient.Chunk) {
	b, _ := json.Marshal(c)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.n++
	fmt.Fprintf(s.w, "id: %d\nevent: chunk\ndata: %s\n\n", s.n, b)
	s.f.Flush()
}

// drain forwards what the subscriptions already hold, then stops them.
//
// A run's chunks are published before its run.finished, and the ingress
// reads both on one connection, so when the result arrives every chunk
// has been read off the socket, though perhaps not yet handed to its
// callback: the subscriptions run on their own goroutines. Draining them
// before the result is sent keeps the answer whole.
func (s *sseWriter) drain(timeout time.Duration) {
	var done []<-chan nats.SubStatus
	for _, sub := range s.subs {
		closed := sub.StatusChanged(nats.SubscriptionClosed)
		if sub.Drain() == nil {
			done = append(done, closed)
		}
	}
	deadline := time.After(timeout)
	for _, ch := range done {
		select {
		case <-ch:
		case <-deadline:
			return
		}
	}
}

// close stops forwarding; no write happens after it returns.
func (s *sseWriter) close() {
	for _, sub := range s.subs {
		_ = sub.Unsubscribe()
	}
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}

// streamStart opens the SSE response and forwards the run's progress (the
// audit events of its steps, as progress chunks) and its answer as the
// synthesiser writes it (the run's chunks on the REPLY stream).
func (g *Ingress) streamStart(w http.ResponseWriter, req orch.RunRequest) (*sseWriter, error) {
	f, ok := w.(http.Flusher)
	if !ok {
		return nil, fmt.Errorf("response writer cannot flush")
	}
	s := &sseWriter{w: w, f: f}
	ofRun := func(m *nats.Msg) bool { return m.Header.Get("ce-"+events.ExtRun) == req.RunID }
	progress, err := g.nc.Subscribe("audit."+req.TenantID+".>", func(m *nats.Msg) {
		if !ofRun(m) {
			return
		}
		name := strings.TrimPrefix(m.Subject, "audit."+req.TenantID+".")
		if !progressEvent(name) {
			return
		}
		var a events.Audit
		_ = json.Unmarshal(m.Data, &a)
		s.send(runclient.Chunk{MessageID: uuid.NewString(), SessionID: req.SessionID, MessageType: "progress",
			Content: name + " " + string(a.Payload), EndOfMessage: true})
	})
	if err != nil {
		return nil, err
	}
	s.subs = append(s.subs, progress)
	answer, err := g.nc.Subscribe(events.ReplySubject(req.TenantID, req.SessionID), func(m *nats.Msg) {
		var c runclient.Chunk
		if !ofRun(m) || json.Unmarshal(m.Data, &c) != nil {
			return
		}
		c.EndOfDialog = false // only the result chunk ends the dialog
		s.send(c)
	})
	if err != nil {
		s.close()
		return nil, err
	}
	s.subs = append(s.subs, answer)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Run-Id", req.RunID)
	w.WriteHeader(http.StatusOK)
	f.Flush()
	return s, g.nc.Flush()
}

// progressEvent selects the trace events a streaming caller sees.
func progressEvent(name string) bool {
	return strings.HasPrefix(name, "step_") || name == "plan.received" || name == "plan.revised" || name == "routing.decided" || name == "replan.triggered"
}

// streamEnd sends the run's result as the last chunk: the whole answer,
// terminal code and usage, whether or not the answer was streamed.
func (g *Ingress) streamEnd(s *sseWriter, req orch.RunRequest, res orch.RunResult) {
	s.drain(time.Second)
	typ := "result"
	if res.TerminalCode != orch.CodeSuccess {
		typ = "error"
	}
	body, _ := json.Marshal(runclient.ResponseOf(res))
	s.send(runclient.Chunk{MessageID: uuid.NewString(), SessionID: req.SessionID, MessageType: typ, Content: string(body),
		EndOfMessage: true, EndOfDialog: true})
}
