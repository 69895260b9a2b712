package a2a

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/google/uuid"

	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
)

// The methods. message/send starts a run with the message's text (its
// contextId the session, a new one when it has none) and answers its
// task once the run ends or parks at a gate (at once, submitted, when
// configuration.blocking is false); message/stream answers as
// server-sent events: the task, then a status-update per progress chunk,
// an artifact-update per piece of the answer, and a last status-update
// marked final. A message whose taskId names a task replies to it: at a
// gate it decides the gate (reply.go) and the task goes on; to a task
// that works, it steers the run (POST /agent/runs/{run_id}/steer); a
// task that ended takes no message. tasks/get reads a task; tasks/cancel
// cancels its run (TaskNotCancelable once it ended) and answers once the
// run ended or after CancelWait; tasks/resubscribe follows a task again.
// Another tenant's task is not found, as a missing one.

// CancelWait bounds how long tasks/cancel waits for the run to end: a run
// in flight stops before its next hop.
const CancelWait = 5 * time.Second

func (c call) now() time.Time { return c.h.runs.Now() }

// send serves message/send.
func (c call) send(raw json.RawMessage) (any, error) {
	var p SendParams
	if err := params(raw, &p); err != nil {
		return nil, err
	}
	if p.Message.TaskID != "" {
		return c.reply(p, nil)
	}
	run, err := c.start(p, false)
	if err != nil {
		return nil, err
	}
	defer run.Close()
	req := run.Request
	if p.Configuration != nil && p.Configuration.Blocking != nil && !*p.Configuration.Blocking {
		return c.pending(req, StateSubmitted, p.Message), nil
	}
	return c.finish(req, run, p.Message), nil
}

// finish waits for run and answers its task.
func (c call) finish(req orch.RunRequest, run *ingress.Started, in Message) Task {
	res, err := run.Wait()
	if err != nil {
		t := c.pending(req, StateWorking, in)
		t.Status.Message = agentMessage(req.RunID, req.SessionID,
			textPart("the run is still in progress; it continues, and tasks/get reads it"))
		return t
	}
	t := taskOf(req, res, c.now())
	t.History = history(req, in)
	return t
}

// pending is the task of a run that goes on.
func (c call) pending(req orch.RunRequest, state string, in Message) Task {
	return Task{Kind: "task", ID: req.RunID, ContextID: req.SessionID, Status: TaskStatus{State: state, Timestamp: stamp(c.now())},
		History: history(req, in), Metadata: runMeta(req.RunID, "", "")}
}

// history is the caller's message, as the task's.
func history(req orch.RunRequest, in Message) []Message {
	in.Kind, in.TaskID, in.ContextID = "message", req.RunID, req.SessionID
	return []Message{in}
}

// start starts the run message p asks for, streaming its chunks if
// stream.
func (c call) start(p SendParams, stream bool) (*ingress.Started, error) {
	task, err := text(p.Message)
	if err != nil {
		return nil, err
	}
	if task == "" {
		return nil, &Error{Code: CodeInvalidParams, Message: "message.parts: the message has no text: it is the task"}
	}
	body := runclient.Request{Message: task, Stream: stream, AgentID: c.agentID, SessionID: p.Message.ContextID}
	if body.SessionID == "" {
		body.SessionID = c.r.Header.Get("X-Session-Id")
	}
	if body.SessionID == "" {
		body.SessionID = "a2a-" + uuid.NewString()
	}
	if !c.namesUser() {
		body.UserID = contextUser(body.SessionID)
	}
	rec := newRecorder()
	run, ok := c.h.runs.Start(rec, c.r, "POST /a2a", body)
	if !ok {
		return nil, rec.refused(false)
	}
	return run, nil
}

// namesUser reports whether the caller names its user (its credential or
// X-User-Id). One that does not is a user of its context only: what it
// says is never recalled by another anonymous caller, and it decides its
// own tasks' gates.
func (c call) namesUser() bool {
	return c.r.Header.Get("X-User-Id") != "" || ingress.BindsUser(c.r)
}

func contextUser(session string) string {
	sum := sha256.Sum256([]byte(session))
	return "a2a-" + hex.EncodeToString(sum[:8])
}

// task is the caller's tenant's task id as it is now.
func (c call) task(id string) (ingress.RunState, error) {
	if id == "" {
		return ingress.RunState{}, &Error{Code: CodeInvalidParams, Message: "the task id is required"}
	}
	rec := newRecorder()
	st, ok := c.h.runs.Run(rec, c.r, id)
	if !ok {
		return st, rec.refused(false)
	}
	return st, nil
}

// get serves tasks/get.
func (c call) get(raw json.RawMessage) (any, error) {
	var p TaskParams
	if err := params(raw, &p); err != nil {
		return nil, err
	}
	st, err := c.task(p.ID)
	if err != nil {
		return nil, err
	}
	t := stateTask(st, c.now())
	if p.HistoryLength != nil && *p.HistoryLength == 0 {
		t.History = nil
	}
	return t, nil
}

// cancel serves tasks/cancel.
func (c call) cancel(raw json.RawMessage) (any, error) {
	var p TaskParams
	if err := params(raw, &p); err != nil {
		return nil, err
	}
	st, err := c.task(p.ID)
	if err != nil {
		return nil, err
	}
	if t := stateTask(st, c.now()); terminal(t.Status.State) {
		return nil, &Error{Code: CodeTaskNotCancelable, Message: "the task has ended: " + t.Status.State}
	}
	run, awaited := c.h.runs.Await(newRecorder(), c.r, "POST /a2a tasks/cancel", st)
	if awaited {
		defer run.Close()
	}
	rec := newRecorder()
	c.h.runs.Cancel(rec, c.r, p.ID)
	if err := rec.refused(true); err != nil {
		return nil, err
	}
	if awaited {
		if res, ok := waitWithin(run, CancelWait); ok && !runclient.Parked(res) {
			return taskOf(run.Request, res, c.now()), nil
		}
	}
	t := stateTask(st, c.now())
	t.Status = TaskStatus{State: StateCanceled, Timestamp: stamp(c.now()), Message: agentMessage(st.RunID, st.Plan.SessionID,
		textPart("the cancel is recorded: the run stops before its next hop"))}
	return t, nil
}

// waitWithin is run's next result, if it comes within d.
func waitWithin(run *ingress.Started, d time.Duration) (orch.RunResult, bool) {
	type result struct {
		res orch.RunResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := run.Wait()
		done <- result{res, err}
	}()
	select {
	case r := <-done:
		return r.res, r.err == nil
	case <-time.After(d):
		return orch.RunResult{}, false
	}
}

// reply serves a message to task p.Message.TaskID: it decides the gate
// the task waits at, or steers its run. With s, it answers as a stream.
func (c call) reply(p SendParams, s *eventStream) (any, error) {
	st, err := c.task(p.Message.TaskID)
	if err != nil {
		return nil, err
	}
	if ctx := p.Message.ContextID; ctx != "" && ctx != st.Plan.SessionID {
		return nil, &Error{Code: CodeInvalidParams, Message: "message.contextId is not the task's context"}
	}
	now := stateTask(st, c.now())
	switch {
	case terminal(now.Status.State):
		return nil, &Error{Code: CodeInvalidParams, Message: "the task has ended (" + now.Status.State + "): start a new task in its context"}
	case st.Gate == nil:
		return c.steer(p, st, s)
	}
	body, err := decision(*st.Gate, p.Message)
	if err != nil {
		return nil, err
	}
	rec := newRecorder()
	run, ok := c.h.runs.Await(rec, c.r, "POST /a2a reply", st)
	if !ok {
		return nil, rec.refused(false)
	}
	defer run.Close()
	rec = newRecorder()
	c.h.runs.Decide(rec, c.approver(st), st.RunID, st.Gate.Gate, body)
	if err := rec.refused(false); err != nil {
		return nil, err
	}
	req := run.Request
	if s != nil {
		if err := s.open(c.pending(req, StateWorking, p.Message)); err != nil {
			return nil, err
		}
		run.Stream(s)
		return nil, nil
	}
	if p.Configuration != nil && p.Configuration.Blocking != nil && !*p.Configuration.Blocking {
		return c.pending(req, StateWorking, p.Message), nil
	}
	return c.finish(req, run, p.Message), nil
}

// approver is the request deciding a gate: the caller's, naming the
// context's user when the caller names none.
func (c call) approver(st ingress.RunState) *http.Request {
	if c.namesUser() {
		return c.r
	}
	r := c.r.Clone(c.r.Context())
	r.Header.Set("X-User-Id", contextUser(st.Plan.SessionID))
	return r
}

// steer sends a working task's run the message's text; the answer is the
// task as it is (followed to its end as a stream with s).
func (c call) steer(p SendParams, st ingress.RunState, s *eventStream) (any, error) {
	msg, err := text(p.Message)
	if err != nil {
		return nil, err
	}
	rec := newRecorder()
	c.h.runs.Steer(rec, c.r, st.RunID, msg)
	if err := rec.refused(false); err != nil {
		return nil, err
	}
	if s != nil {
		return c.follow(st, s)
	}
	return stateTask(st, c.now()), nil
}
