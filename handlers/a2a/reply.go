package a2a

import (
	"slices"
	"strings"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
)

// A reply is a message whose taskId names a task that waits at a gate
// (input-required); it decides the gate as POST
// /agent/runs/{run_id}/approvals/{gate_id} would, and the task goes on.
// What it decides, in this order:
//
//  1. A data part with a "decision" is that route's body as it is:
//     {"decision": "approve"|"deny", "comment", "content", "answers",
//     "extend"}.
//  2. At a clarify gate, the text is the answer to the run's question.
//  3. At an elicitation gate, a data part (or text that is JSON) is the
//     answer to the question, which its schema checks.
//  4. At any other gate (approval, budget, interrupt, human), the text's
//     first word decides: approve, approved, yes, ok or resume approves;
//     deny, denied, reject, rejected or no denies; the rest is the
//     decision's comment.
//
// Anything else is refused with InvalidParams, saying how to reply.

var (
	approveWords = []string{"approve", "approved", "yes", "ok", "resume"}
	denyWords    = []string{"deny", "denied", "reject", "rejected", "no"}
)

// decision is the gate decision reply m makes at gate p.
func decision(p orch.GatePacket, m Message) (runclient.ApprovalRequest, error) {
	var texts []string
	var data json.RawMessage
	for _, part := range m.Parts {
		switch part.Kind {
		case "data":
			var a runclient.ApprovalRequest
			if json.Unmarshal(part.Data, &a) == nil && a.Decision != "" {
				return a, nil
			}
			data = part.Data
		case "text":
			texts = append(texts, part.Text)
		}
	}
	text := strings.TrimSpace(strings.Join(texts, "\n\n"))
	switch p.Kind {
	case orch.GateClarify:
		if text == "" {
			return runclient.ApprovalRequest{}, invalidReply(p)
		}
		content, _ := json.Marshal(text)
		return runclient.ApprovalRequest{Decision: "approve", Content: content}, nil
	case orch.GateElicitation:
		if data == nil && json.Valid([]byte(text)) {
			data = json.RawMessage(text)
		}
		if data == nil {
			return runclient.ApprovalRequest{}, invalidReply(p)
		}
		return runclient.ApprovalRequest{Decision: "approve", Content: data}, nil
	}
	word, comment, _ := strings.Cut(text, " ")
	word = strings.ToLower(strings.Trim(word, ".,;:!"))
	switch {
	case slices.Contains(approveWords, word):
		return runclient.ApprovalRequest{Decision: "approve", Comment: strings.TrimSpace(comment)}, nil
	case slices.Contains(denyWords, word):
		return runclient.ApprovalRequest{Decision: "deny", Comment: strings.TrimSpace(comment)}, nil
	}
	return runclient.ApprovalRequest{}, invalidReply(p)
}

func invalidReply(p orch.GatePacket) error {
	return &Error{Code: CodeInvalidParams, Message: "the task waits at gate " + p.Gate + ": " + howToReply(p)}
}
