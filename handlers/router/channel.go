package router

import (
	"context"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/tools"
)

// AuditAnswerSent records a channel session's answer (or question) sent
// to its conversation.
const AuditAnswerSent = "message.sent"

// Outbound sends a message to a channel conversation (tools.System).
type Outbound interface {
	Send(ctx context.Context, msg tools.OutboundMessage) error
}

// deliver sends what a run started by a trigger (a channel conversation,
// POST /agent/events) says to the user as send_message does (seed 002's
// flow step 9: a text answer is sent automatically): its answer when it
// ends with one, or its question when it parks at a clarify gate (the
// conversation's next message answers it). Its id derives from the run
// and what it sends, so a redelivered hop sends nothing twice. A run
// requested through the API answers its caller instead.
func (r *Router) deliver(ctx context.Context, d *orch.Decision) error {
	req := d.State.Request
	if r.Outbound == nil || req.TriggerID == "" || orch.ValidateRequest(req) != nil {
		return nil
	}
	var kind, text string
	switch {
	case d.Ended != nil && (d.Ended.TerminalCode == orch.CodeSuccess || d.Ended.TerminalCode == orch.CodePartialSuccess):
		kind, text = "answer", d.Ended.Response
	case d.Opened != nil && d.Opened.Kind == orch.GateClarify && d.Opened.Question != nil:
		kind, text = "question/"+d.Opened.ID, d.Opened.Question.Text
	}
	if text == "" {
		return nil
	}
	msg := tools.OutboundMessage{MessageID: "msg-" + events.DeriveID(req.RunID, "channel/"+kind), TenantID: req.TenantID,
		SessionID: req.SessionID, RunID: req.RunID, UserID: req.UserID, Text: text, TS: r.Now().UTC()}
	if err := r.Outbound.Send(ctx, msg); err != nil {
		return err
	}
	beforeEnd(d, orch.Audit{Name: AuditAnswerSent, Payload: map[string]any{"message_id": msg.MessageID, "tool": "send_message",
		"auto": true, "kind": kind, "text_bytes": len(text)}})
	return nil
}
