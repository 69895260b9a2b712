package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/store"
)

// OutboundSubject is the subject of a tenant's outbound messages
// (send_message), read by a channel adapter; on the AGENT stream.
func OutboundSubject(tenant string) string { return "agent.outbound." + tenant }

// FlowSubject is the subject of a tenant's flow requests (trigger_flow),
// read by a flow service; on the AGENT stream.
func FlowSubject(tenant string) string { return "agent.flows." + tenant }

// Subjects are the subject patterns the system tools publish on.
var Subjects = []string{"agent.outbound.*", "agent.flows.*"}

// OutboundMessage is what send_message publishes.
type OutboundMessage struct {
	MessageID string    `json:"message_id"`
	TenantID  string    `json:"tenant_id"`
	SessionID string    `json:"session_id"`
	RunID     string    `json:"run_id"`
	UserID    string    `json:"user_id,omitempty"`
	Text      string    `json:"text"`
	TS        time.Time `json:"ts"`
}

// FlowRequest is what trigger_flow publishes.
type FlowRequest struct {
	RequestID string          `json:"request_id"`
	FlowID    string          `json:"flow_id"`
	Input     json.RawMessage `json:"input,omitempty"`
	TenantID  string          `json:"tenant_id"`
	SessionID string          `json:"session_id"`
	RunID     string          `json:"run_id"`
	TS        time.Time       `json:"ts"`
}

// MemoryStore is the memory the context tools read and write.
type MemoryStore interface {
	PutMemory(ctx context.Context, m store.Memory) (store.Memory, error)
	GetMemory(ctx context.Context, key string) (store.Memory, error)
}

// SessionCloser marks a tenant's session completed (handlers.Sessions).
type SessionCloser interface {
	Complete(ctx context.Context, tenantID, sessionID, runID string, at time.Time) error
}

// System runs the built-in system tools. handoff_to_agent and
// handoff_to_human are listed in the catalog but run by the decider, not
// here.
type System struct {
	JS       jetstream.JetStream
	Memory   MemoryStore
	Sessions SessionCloser
	Now      func() time.Time
	// Retention sets the ttl_at of set_context's values (session scope);
	// zero keeps them for ever.
	Retention store.MemoryRetention
}

// Serves reports whether s runs the tool name.
func (s *System) Serves(name string) bool {
	switch name {
	case agents.ToolSendMessage, agents.ToolEndConversation, agents.ToolTriggerFlow, agents.ToolSetContext, agents.ToolGetContext:
		return true
	}
	return false
}

func (s *System) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

// failed is a tool error the model sees.
func failed(name, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", skills.ErrSkillFailed, name, fmt.Sprintf(format, args...))
}

// Call runs system tool name for tenant; key is the call's idempotency
// key, which makes a repeated publication a duplicate the stream drops.
func (s *System) Call(ctx context.Context, tenant, name string, args json.RawMessage, key string) ([]byte, error) {
	info := skills.CallInfoFrom(ctx)
	if !events.ValidToken(tenant) {
		return nil, fmt.Errorf("%w: %q", skills.ErrInvalidTenant, tenant)
	}
	if info.SessionID == "" {
		return nil, failed(name, "the run has no session")
	}
	switch name {
	case agents.ToolSendMessage:
		var in struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(args, &in); err != nil {
			return nil, fmt.Errorf("%w: %v", skills.ErrInvalidArguments, err)
		}
		msg := OutboundMessage{MessageID: "msg-" + hashID(key), TenantID: tenant, SessionID: info.SessionID, RunID: info.RunID,
			UserID: info.UserID, Text: in.Text, TS: s.now()}
		if err := s.Send(ctx, msg); err != nil {
			return nil, err
		}
		return json.Marshal(map[string]any{"message_id": msg.MessageID, "status": "sent"})
	case agents.ToolTriggerFlow:
		var in struct {
			FlowID string          `json:"flow_id"`
			Input  json.RawMessage `json:"input"`
		}
		if err := json.Unmarshal(args, &in); err != nil {
			return nil, fmt.Errorf("%w: %v", skills.ErrInvalidArguments, err)
		}
		req := FlowRequest{RequestID: "flow-" + hashID(key), FlowID: in.FlowID, Input: in.Input, TenantID: tenant,
			SessionID: info.SessionID, RunID: info.RunID, TS: s.now()}
		if err := s.publish(ctx, FlowSubject(tenant), req.RequestID, req); err != nil {
			return nil, err
		}
		return json.Marshal(map[string]any{"request_id": req.RequestID, "flow_id": in.FlowID, "status": "requested"})
	case agents.ToolEndConversation:
		if err := s.Sessions.Complete(ctx, tenant, info.SessionID, info.RunID, s.now()); err != nil {
			return nil, fmt.Errorf("tools: end_conversation: %w", err)
		}
		return json.Marshal(map[string]any{"session_id": info.SessionID, "state": orch.SessionCompleted})
	case agents.ToolSetContext, agents.ToolGetContext:
		return s.context(ctx, tenant, name, info, args)
	}
	return nil, fmt.Errorf("%w: %s", skills.ErrSkillNotFound, name)
}

// Send publishes msg on its tenant's outbound subject, as send_message
// does: the channel's connector delivers it to the conversation. Its
// MessageID makes a repeated send a duplicate the stream drops.
func (s *System) Send(ctx context.Context, msg OutboundMessage) error {
	if !events.ValidToken(msg.TenantID) {
		return fmt.Errorf("%w: %q", skills.ErrInvalidTenant, msg.TenantID)
	}
	return s.publish(ctx, OutboundSubject(msg.TenantID), msg.MessageID, msg)
}

func (s *System) publish(ctx context.Context, subject, id string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	msg := nats.NewMsg(subject)
	msg.Data = data
	msg.Header.Set(jetstream.MsgIDHeader, id) // a retried call publishes a duplicate, dropped
	msg.Header.Set("Content-Type", "application/json")
	if _, err := s.JS.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("tools: publish on %s: %w", subject, err)
	}
	return nil
}

// contextKey is the memory key of a session's context value: tenant and
// session first, so no other tenant's or session's key can collide.
func contextKey(tenant, session, key string) string {
	return tenant + ":" + session + ":context:" + key
}

func (s *System) context(ctx context.Context, tenant, name string, info skills.CallInfo, args json.RawMessage) ([]byte, error) {
	var in struct {
		Key   string          `json:"key"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return nil, fmt.Errorf("%w: %v", skills.ErrInvalidArguments, err)
	}
	if !contextKeyRE.MatchString(in.Key) {
		return nil, fmt.Errorf("%w: key must match %s", skills.ErrInvalidArguments, agents.ContextKeyPattern)
	}
	key := contextKey(tenant, info.SessionID, in.Key)
	if name == agents.ToolSetContext {
		if len(in.Value) == 0 || len(in.Value) > agents.MaxContextValueLen {
			return nil, failed(name, "a value has 1 to %d bytes", agents.MaxContextValueLen)
		}
		now := s.now()
		_, err := s.Memory.PutMemory(ctx, store.Memory{ID: key, Key: key, TenantID: tenant, SessionID: info.SessionID,
			UserID: info.UserID, TaskID: "context", Scope: store.ScopeSession, Source: agents.ToolSetContext, Text: string(in.Value),
			CreatedAt: now, TTLAt: s.Retention.TTLAt(store.ScopeSession, now)})
		if err != nil {
			return nil, fmt.Errorf("tools: set_context: %w", err)
		}
		return json.Marshal(map[string]any{"key": in.Key, "stored": true})
	}
	m, err := s.Memory.GetMemory(ctx, key)
	if errors.Is(err, store.ErrNotFound) || err == nil && (m.TenantID != tenant || m.SessionID != info.SessionID) {
		return json.Marshal(map[string]any{"key": in.Key, "found": false})
	}
	if err != nil {
		return nil, fmt.Errorf("tools: get_context: %w", err)
	}
	return json.Marshal(map[string]any{"key": in.Key, "found": true, "value": json.RawMessage(m.Text)})
}

var contextKeyRE = regexp.MustCompile(agents.ContextKeyPattern)

// hashID is a short stable id derived from a call's idempotency key.
func hashID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:16])
}
