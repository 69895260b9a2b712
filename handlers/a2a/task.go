package a2a

import (
	"cmp"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/google/uuid"

	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
	"github.com/agentbus/agentbus/store"
)

// A run as a task: the task id is the run id, the context id its session.
// A run that waits at a gate is input-required, its status message the
// gate (what it asks, or what is to be decided, and how to reply), with
// the gate's packet as a data part; a run that ended SUCCESS or
// PARTIAL_SUCCESS is completed, its answer the "answer" artifact;
// USER_CANCEL is canceled; a run whose gate was rejected is rejected;
// any other end is failed, its status message the reason. The metadata's
// "agentbus" names the run, its plan, status and terminal code.

// answerArtifact is the id of a task's answer.
const answerArtifact = "answer"

// agentMessage is a message of the agent about task taskID.
func agentMessage(taskID, contextID string, parts ...Part) *Message {
	return &Message{Kind: "message", MessageID: uuid.NewString(), Role: "agent", Parts: parts, TaskID: taskID, ContextID: contextID}
}

func textPart(s string) Part { return Part{Kind: "text", Text: s} }

// stateOf is the task state of a run's result.
func stateOf(res orch.RunResult) string {
	switch {
	case runclient.Parked(res):
		return StateInputRequired
	case res.TerminalCode == orch.CodeSuccess || res.TerminalCode == orch.CodePartialSuccess:
		return StateCompleted
	case res.TerminalCode == orch.CodeUserCancel:
		return StateCanceled
	case res.Status == orch.PlanRejected:
		return StateRejected
	default:
		return StateFailed
	}
}

// resultStatus is the status, and the artifacts, of a task whose run
// gave res.
func resultStatus(taskID, contextID string, res orch.RunResult) (TaskStatus, []Artifact) {
	st := TaskStatus{State: stateOf(res)}
	switch st.State {
	case StateInputRequired:
		var p orch.GatePacket
		_ = json.Unmarshal(res.Detail, &p)
		st.Message = gateMessage(taskID, contextID, p)
	case StateCompleted:
		return st, []Artifact{answer(res.Response)}
	default:
		if res.Response != "" {
			st.Message = agentMessage(taskID, contextID, textPart(res.Response))
		}
	}
	return st, nil
}

func answer(text string) Artifact {
	return Artifact{ArtifactID: answerArtifact, Name: answerArtifact, Parts: []Part{textPart(text)}}
}

// taskOf is the task of run req that gave res.
func taskOf(req orch.RunRequest, res orch.RunResult, now time.Time) Task {
	st, artifacts := resultStatus(req.RunID, req.SessionID, res)
	st.Timestamp = stamp(now)
	return Task{Kind: "task", ID: req.RunID, ContextID: req.SessionID, Status: st, Artifacts: artifacts,
		Metadata: runMeta(req.RunID, res.Status, res.TerminalCode)}
}

// stateTask is the task of a run as it is now (tasks/get).
func stateTask(st ingress.RunState, now time.Time) Task {
	id, ctx := st.RunID, st.Plan.SessionID
	t := Task{Kind: "task", ID: id, ContextID: ctx, Status: TaskStatus{State: StateWorking, Timestamp: stamp(now)}}
	code := ""
	switch e := st.Execution; {
	case st.Gate != nil:
		t.Status.State, t.Status.Message = StateInputRequired, gateMessage(id, ctx, *st.Gate)
	case e != nil:
		code = e.TerminalCode
		t.Status, t.Artifacts = resultStatus(id, ctx, orch.RunResult{Status: st.Plan.Status, TerminalCode: e.TerminalCode,
			Response: cmp.Or(e.Output, e.ErrorReason)})
		t.Status.Timestamp = stamp(now)
	case st.Plan.Status == store.PlanStatusPending:
		t.Status.State = StateSubmitted
	case st.Plan.Status == store.PlanStatusComplete:
		t.Status.State = StateCompleted
	case st.Plan.Status == store.PlanStatusRejected:
		t.Status.State = StateRejected
	case store.PlanFinished(st.Plan.Status):
		t.Status.State = StateFailed
	}
	if e := st.Execution; e != nil && e.Input != "" {
		t.History = []Message{{Kind: "message", MessageID: id + "-input", Role: "user", Parts: []Part{textPart(e.Input)},
			TaskID: id, ContextID: ctx}}
	}
	t.Metadata = runMeta(id, st.Plan.Status, code)
	return t
}

func runMeta(runID, status, code string) map[string]any {
	m := map[string]any{"run_id": runID, "plan_id": orch.PlanID(runID), "status": status}
	if code != "" {
		m["terminal_code"] = code
	}
	return map[string]any{"agentbus": m}
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// terminal reports whether a task state is final: no message moves it.
func terminal(state string) bool {
	switch state {
	case StateCompleted, StateCanceled, StateFailed, StateRejected:
		return true
	}
	return false
}

// gateMessage is the status message of a task that waits at gate p:
// what the gate waits for, how to reply, and the packet as data.
func gateMessage(taskID, contextID string, p orch.GatePacket) *Message {
	packet, _ := json.Marshal(p)
	return agentMessage(taskID, contextID, textPart(runclient.GateMessage(p)+"\n\n"+howToReply(p)),
		Part{Kind: "data", Data: packet, Metadata: map[string]any{"agentbus": "gate"}})
}

// howToReply says what reply decides a gate (reply.go).
func howToReply(p orch.GatePacket) string {
	switch p.Kind {
	case orch.GateClarify:
		return "Reply to this task with the answer as text."
	case orch.GateElicitation:
		return `Reply to this task with a data part: the answer object the question's schema asks for (or {"decision": "deny"}).`
	case orch.GateBudget:
		return `Reply to this task with a data part {"decision": "approve", "extend": {"tool_calls": 10}} to extend the run's limits, or "deny".`
	default:
		return `Reply to this task with "approve" or "deny" (a comment may follow), or a data part {"decision": "approve"|"deny", "comment": "..."}.`
	}
}
