package a2a

import (
	"errors"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
)

// TestDecision: the reply rule. A data part with a decision is the
// native body as it is; a clarify gate's answer is the text; an
// elicitation gate's a data part or JSON text; any other gate's the first
// word, the rest its comment; anything else is InvalidParams.
func TestDecision(t *testing.T) {
	text := func(s string) Message { return Message{Parts: []Part{{Kind: "text", Text: s}}} }
	data := func(s string) Message { return Message{Parts: []Part{{Kind: "data", Data: json.RawMessage(s)}}} }
	approval := orch.GatePacket{Gate: "g1", Kind: orch.GateApproval}
	clarify := orch.GatePacket{Gate: "g2", Kind: orch.GateClarify}
	elicit := orch.GatePacket{Gate: "g3", Kind: orch.GateElicitation}
	budget := orch.GatePacket{Gate: "g4", Kind: orch.GateBudget}
	for _, c := range []struct {
		name string
		gate orch.GatePacket
		msg  Message
		want string // the decision's JSON; "" for a refusal
	}{
		{"approve", approval, text("Approve"), `{"decision":"approve"}`},
		{"yes with a comment", approval, text("yes: read-only anyway"), `{"decision":"approve","comment":"read-only anyway"}`},
		{"deny", approval, text("deny, too risky"), `{"decision":"deny","comment":"too risky"}`},
		{"neither", approval, text("perhaps"), ""},
		{"empty", approval, Message{}, ""},
		{"a native body", budget, data(`{"decision":"approve","extend":{"tool_calls":10}}`), `{"decision":"approve","extend":{"tool_calls":10}}`},
		{"the answer", clarify, text("the last 30 days"), `{"decision":"approve","content":"the last 30 days"}`},
		{"a word is an answer too", clarify, text("no"), `{"decision":"approve","content":"no"}`},
		{"a denied question", clarify, data(`{"decision":"deny"}`), `{"decision":"deny"}`},
		{"no answer", clarify, text("  "), ""},
		{"an elicited object", elicit, data(`{"region":"EU"}`), `{"decision":"approve","content":{"region":"EU"}}`},
		{"an elicited object as text", elicit, text(`{"region":"EU"}`), `{"decision":"approve","content":{"region":"EU"}}`},
		{"an elicitation answered in words", elicit, text("EU please"), ""},
	} {
		got, err := decision(c.gate, c.msg)
		if c.want == "" {
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeInvalidParams {
				t.Errorf("%s: %+v %v, want InvalidParams", c.name, got, err)
			}
			continue
		}
		b, _ := json.Marshal(got)
		var want runclient.ApprovalRequest
		_ = json.Unmarshal([]byte(c.want), &want)
		wb, _ := json.Marshal(want)
		if err != nil || string(b) != string(wb) {
			t.Errorf("%s: %s %v, want %s", c.name, b, err, wb)
		}
	}
}

// TestTaskOfResult: a run's result as a task: parked is input-required
// with the gate's message, SUCCESS and PARTIAL_SUCCESS completed with the
// answer artifact, USER_CANCEL canceled, a rejected gate rejected, any
// other end failed with its reason.
func TestTaskOfResult(t *testing.T) {
	req := orch.RunRequest{RunID: "run-1", SessionID: "sess-1"}
	packet, _ := json.Marshal(orch.GatePacket{Gate: "g1", Kind: orch.GateApproval})
	for _, c := range []struct {
		res      orch.RunResult
		state    string
		artifact string
		message  string
	}{
		{orch.RunResult{Status: orch.PlanAwaitingGate, Detail: packet}, StateInputRequired, "", "waits at gate g1"},
		{orch.RunResult{Status: orch.PlanComplete, TerminalCode: orch.CodeSuccess, Response: "42"}, StateCompleted, "42", ""},
		{orch.RunResult{Status: orch.PlanComplete, TerminalCode: orch.CodePartialSuccess, Response: "most"}, StateCompleted, "most", ""},
		{orch.RunResult{Status: orch.PlanFailed, TerminalCode: orch.CodeUserCancel, Response: "cancelled"}, StateCanceled, "", "cancelled"},
		{orch.RunResult{Status: orch.PlanRejected, TerminalCode: orch.CodePermissionDenied, Response: "denied"}, StateRejected, "", "denied"},
		{orch.RunResult{Status: orch.PlanFailed, TerminalCode: orch.CodeTimeout, Response: "too slow"}, StateFailed, "", "too slow"},
	} {
		task := taskOf(req, c.res, time.Now())
		got := ""
		if len(task.Artifacts) == 1 {
			got = task.Artifacts[0].Parts[0].Text
		}
		msg := ""
		if task.Status.Message != nil {
			msg = task.Status.Message.Parts[0].Text
		}
		if task.ID != "run-1" || task.ContextID != "sess-1" || task.Status.State != c.state || got != c.artifact ||
			(c.message == "") != (msg == "") || !strings.Contains(msg, c.message) {
			t.Errorf("%+v: %+v", c.res, task)
		}
	}
}

// TestPartWire: a text part always carries its text, a data part its
// data, as the protocol requires.
func TestPartWire(t *testing.T) {
	for _, c := range []struct {
		part Part
		want string
	}{
		{Part{Kind: "text"}, `{"kind":"text","text":""}`},
		{Part{Kind: "data"}, `{"kind":"data","data":{}}`},
		{Part{Kind: "data", Data: json.RawMessage(`{"a":1}`)}, `{"kind":"data","data":{"a":1}}`},
	} {
		if b, err := json.Marshal(c.part); err != nil || string(b) != c.want {
			t.Errorf("%+v: %s %v, want %s", c.part, b, err, c.want)
		}
	}
}
