package ingress

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
	"github.com/agentbus/agentbus/store"
)

// Streaming. The roles publish a streaming run's chunks on the REPLY
// stream: the router its progress and its result, the synthesiser the
// answer as it is written. The ingress serves them as server-sent events
// read from the stream, the SSE id of each being its stream sequence, so a
// client that lost the connection resumes with GET
// /agent/runs/{run_id}/stream and Last-Event-ID: no chunk lost, none
// repeated.

// ChunkSink is where the chunks of a followed run go: the native SSE
// stream (sseWriter) or an adapter's (handlers/chat). Send is given the
// chunk's REPLY stream sequence (0 for a chunk the ingress made); Ended
// reports that the run's last chunk was sent.
type ChunkSink interface {
	Send(seq uint64, c runclient.Chunk)
	Ended() bool
}

// sseWriter serialises writes to one SSE response.
type sseWriter struct {
	mu     sync.Mutex
	w      http.ResponseWriter
	f      http.Flusher
	closed bool
	ended  bool // the result chunk was sent
}

// send writes one chunk; seq, when not zero, is its SSE id.
func (s *sseWriter) Send(seq uint64, c runclient.Chunk) {
	b, _ := json.Marshal(c)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.ended {
		return
	}
	if seq > 0 {
		fmt.Fprintf(s.w, "id: %d\n", seq)
	}
	fmt.Fprintf(s.w, "event: chunk\ndata: %s\n\n", b)
	s.f.Flush()
	s.ended = c.EndOfDialog
}

func (s *sseWriter) Ended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}

// close stops writing; no write happens after it returns.
func (s *sseWriter) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}

// openSSE starts an SSE response for run; its headers name the run and
// its plan (which the run viewer reads while the run goes on).
func openSSE(w http.ResponseWriter, runID string) (*sseWriter, error) {
	f, ok := w.(http.Flusher)
	if !ok {
		return nil, errors.New("response writer cannot flush")
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Run-Id", runID)
	w.Header().Set("X-Plan-Id", orch.PlanID(runID))
	w.WriteHeader(http.StatusOK)
	f.Flush()
	return &sseWriter{w: w, f: f}, nil
}

// replyTail is the REPLY stream's last sequence: a run submitted after it
// is read has every chunk after it.
func (g *Ingress) replyTail(ctx context.Context) (uint64, error) {
	s, err := g.js.Stream(ctx, events.StreamReply)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.LastSeq, nil
}

// follow forwards the run's chunks on the session's reply subject, from
// stream sequence after+1, until the run's result chunk or ctx ends. idle,
// when set, is asked after each second without a chunk whether to stop.
func (g *Ingress) follow(ctx context.Context, s ChunkSink, tenant, session, runID string, after uint64, idle func() bool) error {
	cons, err := g.js.OrderedConsumer(ctx, events.StreamReply, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{events.ReplySubject(tenant, session)},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy, OptStartSeq: after + 1})
	if err != nil {
		return err
	}
	for ctx.Err() == nil && !s.Ended() {
		batch, err := cons.Fetch(64, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			var c runclient.Chunk
			if m.Headers().Get("ce-"+events.ExtRun) != runID || json.Unmarshal(m.Data(), &c) != nil {
				continue
			}
			meta, err := m.Metadata()
			if err != nil {
				return err
			}
			s.Send(meta.Sequence.Stream, c)
		}
		if batch.Error() != nil && !errors.Is(batch.Error(), jetstream.ErrNoMessages) && ctx.Err() == nil {
			return batch.Error()
		}
		if n == 0 && idle != nil && idle() {
			return nil
		}
	}
	return ctx.Err()
}

// streamRun serves a streamed run: chunks from the REPLY stream after
// tail until its result chunk. If the run ends without one (a run ended
// for a dead-lettered message carries no stream flag), the result from
// run.finished ends the stream instead, as it does for a request whose
// message answered another run's question (that run's result).
func (g *Ingress) streamRun(ctx context.Context, s ChunkSink, req orch.RunRequest, tail uint64, wait func(context.Context) (orch.RunResult, error)) {
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	followed := make(chan error, 1)
	go func() { followed <- g.follow(fctx, s, req.TenantID, req.SessionID, req.RunID, tail, nil) }()
	res, err := wait(ctx)
	if err == nil && !runclient.Parked(res) && res.RunID == req.RunID {
		// The result chunk is published with run.finished: give the
		// stream a moment to deliver it before answering from the result.
		select {
		case <-followed:
		case <-time.After(2 * time.Second):
		}
	}
	stop()
	switch {
	case s.Ended():
	case err == nil && runclient.Parked(res):
		// This response ends; the run waits for its gate's decision and
		// GET /agent/runs/{run_id}/stream follows it on.
		s.Send(0, runclient.Chunk{MessageID: uuid.NewString(), SessionID: req.SessionID, MessageType: runclient.ChunkAwaitingGate,
			Content: string(res.Detail), EndOfMessage: true, EndOfDialog: true})
	case err == nil:
		typ := "result"
		if res.TerminalCode != orch.CodeSuccess && res.TerminalCode != orch.CodePartialSuccess {
			typ = "error"
		}
		body, _ := json.Marshal(runclient.ResponseOf(res))
		s.Send(0, runclient.Chunk{MessageID: uuid.NewString(), SessionID: req.SessionID, MessageType: typ, Content: string(body),
			EndOfMessage: true, EndOfDialog: true})
	default:
		s.Send(0, runclient.Chunk{MessageID: uuid.NewString(), SessionID: req.SessionID, MessageType: "error",
			Content: "run_timeout: the run is still in progress", EndOfMessage: true, EndOfDialog: true})
	}
}

// stream serves GET /agent/runs/{run_id}/stream: the chunks of a run of
// the caller's tenant, after the Last-Event-ID header (or last_event_id
// query parameter) if given, until the run's result chunk. A run of
// another tenant is not found, exactly as a missing one.
func (g *Ingress) stream(w http.ResponseWriter, r *http.Request) {
	tenant, ok := readScope(w, r)
	if !ok {
		return
	}
	runID := r.PathValue("run_id")
	if orch.ValidateID("run_id", runID) != nil {
		WriteError(w, http.StatusNotFound, "not_found", "run not found")
		return
	}
	var after uint64
	if last := cmpOr(r.Header.Get("Last-Event-ID"), r.URL.Query().Get("last_event_id")); last != "" {
		n, err := strconv.ParseUint(last, 10, 64)
		if err != nil {
			WriteError(w, http.StatusBadRequest, "invalid_request", "Last-Event-ID must be a stream sequence")
			return
		}
		after = n
	}
	p, err := g.runPlan(r.Context(), tenant, runID)
	if g.storeError(w, err, "run") {
		return
	}
	s, err := openSSE(w, runID)
	if err != nil {
		WriteError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	defer s.close()
	ctx, cancel := context.WithTimeout(r.Context(), g.cfg.RunTimeout)
	defer cancel()
	// A finished run whose stream has nothing more ends the response.
	idle := func() bool {
		p, _, err := g.store.GetPlan(ctx, tenant, orch.PlanID(runID))
		return err == nil && store.PlanFinished(p.Status)
	}
	if err := g.follow(ctx, s, tenant, p.SessionID, runID, after, idle); err != nil && ctx.Err() == nil {
		g.log.Warn().Err(err).Str("run_id", runID).Msg("stream")
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
