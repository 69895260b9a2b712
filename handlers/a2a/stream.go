package a2a

import (
	"errors"
	"fmt"
	"net/http"
	"sync"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
)

// stream serves message/stream.
func (c call) stream(raw json.RawMessage) (any, error) {
	s := &eventStream{w: c.w, id: c.id}
	defer s.close()
	var p SendParams
	err := params(raw, &p)
	switch {
	case err != nil:
	case p.Message.TaskID != "":
		_, err = c.reply(p, s)
	default:
		err = c.streamRun(p, s)
	}
	if err != nil {
		s.fail(rpcError(err))
	}
	return nil, nil
}

// streamRun starts the run p asks for and streams it to its end or its
// gate.
func (c call) streamRun(p SendParams, s *eventStream) error {
	run, err := c.start(p, true)
	if err != nil {
		return err
	}
	defer run.Close()
	if err := s.open(c.pending(run.Request, StateSubmitted, p.Message)); err != nil {
		return err
	}
	run.Stream(s)
	return nil
}

// resubscribe serves tasks/resubscribe: the task as it is, then, while it
// works, its events from now on; a task that ended or waits at a gate
// ends the stream at once.
func (c call) resubscribe(raw json.RawMessage) (any, error) {
	s := &eventStream{w: c.w, id: c.id}
	defer s.close()
	var p TaskParams
	err := params(raw, &p)
	if err == nil {
		var st ingress.RunState
		if st, err = c.task(p.ID); err == nil {
			_, err = c.follow(st, s)
		}
	}
	if err != nil {
		s.fail(rpcError(err))
	}
	return nil, nil
}

// follow streams run st from now on: its task first (unless s has sent
// it), then, while it works, its events until its end or its next gate.
func (c call) follow(st ingress.RunState, s *eventStream) (any, error) {
	if !s.opened {
		if err := s.open(stateTask(st, c.now())); err != nil {
			return nil, err
		}
	}
	rec := newRecorder()
	run, ok := c.h.runs.Await(rec, c.r, "POST /a2a tasks/resubscribe", st)
	if !ok {
		return nil, rec.refused(false)
	}
	defer run.Close()
	// Read again once awaited: a run that ended meanwhile sends nothing more.
	if now, err := c.task(st.RunID); err != nil {
		return nil, err
	} else if t := stateTask(now, c.now()); terminal(t.Status.State) || t.Status.State == StateInputRequired {
		s.final(t.Status, t.Artifacts)
		return nil, nil
	}
	run.Stream(s)
	return nil, nil
}

// eventStream serves a task's events as server-sent events, each a
// JSON-RPC response carrying a Task, a StatusUpdate or an ArtifactUpdate:
// the run's progress chunks become working status-updates with their
// one-line account, its answer artifact-updates of the "answer"
// artifact, its gate an input-required status-update and its result the
// final one.
type eventStream struct {
	mu                sync.Mutex
	w                 http.ResponseWriter
	f                 http.Flusher
	id                json.RawMessage
	taskID, contextID string
	opened, answered  bool
	ended, closed     bool
}

// open starts the response with the task's first event.
func (s *eventStream) open(t Task) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.start(); err != nil {
		return err
	}
	s.taskID, s.contextID = t.ID, t.ContextID
	s.write(t)
	return nil
}

func (s *eventStream) start() error {
	if s.opened {
		return nil
	}
	f, ok := s.w.(http.Flusher)
	if !ok {
		return errors.New("response writer cannot flush")
	}
	s.f, s.opened = f, true
	s.w.Header().Set("Content-Type", "text/event-stream")
	s.w.Header().Set("Cache-Control", "no-cache")
	s.w.WriteHeader(http.StatusOK)
	return nil
}

// fail ends the stream with a JSON-RPC error.
func (s *eventStream) fail(e *Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.ended || s.start() != nil {
		return
	}
	s.send(Response{JSONRPC: "2.0", ID: s.rpcID(), Error: e})
	s.ended = true
}

// Send translates one chunk of the run.
func (s *eventStream) Send(_ uint64, c runclient.Chunk) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.ended {
		return
	}
	switch c.MessageType {
	case "answer":
		s.write(ArtifactUpdate{Kind: "artifact-update", TaskID: s.taskID, ContextID: s.contextID,
			Artifact: Artifact{ArtifactID: answerArtifact, Name: answerArtifact, Parts: []Part{textPart(c.Content)}},
			Append:   s.answered, LastChunk: c.EndOfMessage})
		s.answered = true
	case runclient.ChunkAwaitingGate:
		var p orch.GatePacket
		_ = json.Unmarshal([]byte(c.Content), &p)
		if !c.EndOfDialog {
			s.working(fmt.Sprintf("waiting at gate %s", p.Gate))
			return
		}
		s.finalLocked(TaskStatus{State: StateInputRequired, Message: gateMessage(s.taskID, s.contextID, p)}, nil)
	case "result", "error":
		var resp runclient.Response
		if json.Unmarshal([]byte(c.Content), &resp) != nil {
			// A failure the ingress wrote as text: the run goes on.
			s.finalLocked(TaskStatus{State: StateWorking, Message: agentMessage(s.taskID, s.contextID, textPart(c.Content))}, nil)
			return
		}
		st, artifacts := resultStatus(s.taskID, s.contextID, orch.RunResult{RunID: resp.RunID, Status: resp.Status,
			TerminalCode: resp.TerminalCode, Response: resp.Response, Detail: resp.Detail})
		s.finalLocked(st, artifacts)
	default:
		if line, ok := runclient.Describe(c); ok {
			s.working(line)
		}
	}
}

// working sends a working status-update saying line.
func (s *eventStream) working(line string) {
	s.write(StatusUpdate{Kind: "status-update", TaskID: s.taskID, ContextID: s.contextID,
		Status: TaskStatus{State: StateWorking, Message: agentMessage(s.taskID, s.contextID, textPart(line))}})
}

// final ends the stream: the artifacts not streamed yet, then the status
// marked final.
func (s *eventStream) final(st TaskStatus, artifacts []Artifact) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed && !s.ended {
		s.finalLocked(st, artifacts)
	}
}

func (s *eventStream) finalLocked(st TaskStatus, artifacts []Artifact) {
	if !s.answered {
		for _, a := range artifacts {
			s.write(ArtifactUpdate{Kind: "artifact-update", TaskID: s.taskID, ContextID: s.contextID, Artifact: a, LastChunk: true})
		}
	}
	s.write(StatusUpdate{Kind: "status-update", TaskID: s.taskID, ContextID: s.contextID, Status: st, Final: true,
		Metadata: map[string]any{"agentbus": map[string]any{"run_id": s.taskID}}})
	s.ended = true
}

// write sends one event as the result of the call.
func (s *eventStream) write(result any) {
	s.send(Response{JSONRPC: "2.0", ID: s.rpcID(), Result: result})
}

func (s *eventStream) send(r Response) {
	b, _ := json.Marshal(r)
	fmt.Fprintf(s.w, "data: %s\n\n", b)
	s.f.Flush()
}

func (s *eventStream) rpcID() json.RawMessage {
	if len(s.id) == 0 {
		return json.RawMessage("null")
	}
	return s.id
}

// Ended reports that the final event was sent.
func (s *eventStream) Ended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}

// close stops writing; no write happens after it returns.
func (s *eventStream) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}
