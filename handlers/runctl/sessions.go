package runctl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/kvcas"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
	"github.com/agentbus/agentbus/text"
)

// History bounds: a session keeps its last HistoryKeep messages verbatim
// (each cut to HistoryMessageBytes) and condenses the older ones into one
// summary message of at most HistorySummaryBytes, so the context a run
// carries in every message stays bounded however long the session runs.
const (
	HistoryKeep         = 6
	HistoryMessageBytes = 1000
	HistorySummaryBytes = 1500
)

// Session message roles.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleSummary   = "summary"
)

// AuditSessionUpdated names the audit event that carries a session after
// a run appended its exchange; the projector indexes it into
// agent_sessions and writes the exchange to the user's memory.
const AuditSessionUpdated = "session.updated"

// SessionUpdated is the payload of a session.updated audit event.
type SessionUpdated struct {
	// Revision orders the snapshots of one session.
	Revision uint64        `json:"revision"`
	Session  store.Session `json:"session"`
	// RunID, UserID, Message and Answer are the exchange the run
	// appended.
	RunID   string `json:"run_id"`
	UserID  string `json:"user_id"`
	Message string `json:"message"`
	Answer  string `json:"answer"`
	// HandedOff says the run was handed to a human: no exchange was
	// appended (the reply will be).
	HandedOff bool `json:"handed_off,omitempty"`
	// Asking says the run asked its user a question (a clarify gate): no
	// exchange was appended (the run's end will be).
	Asking bool `json:"asking,omitempty"`
	// Operator, for a change no run made (an operator's handoff, a
	// human's reply to it), is who made it and Action its id; no
	// exchange is written to memory.
	Operator string `json:"operator,omitempty"`
	Action   string `json:"action,omitempty"`
	// Code is the terminal code of the run that appended the exchange:
	// only a successful exchange becomes long-term memory.
	Code string `json:"terminal_code,omitempty"`
}

// Sessions keeps every session's bounded conversation in the sessions KV
// bucket, by tenant and session: the router reads a session's history when
// a run starts and appends the run's exchange when it ends, before the
// caller gets the answer, so the session's next run always sees it. The
// bucket is the authority; agent_sessions is its projection.
type Sessions struct {
	KV jetstream.KeyValue
}

// SessionKey is the bucket key of a session: tenant and session ids are
// both strict tokens, so the key never collides across tenants.
func SessionKey(tenantID, sessionID string) string { return tenantID + "." + sessionID }

// Get returns a session of tenantID, or store.ErrNotFound: another
// tenant's session is not found either.
func (s *Sessions) Get(ctx context.Context, tenantID, sessionID string) (store.Session, uint64, error) {
	if orch.ValidateID("tenant_id", tenantID) != nil || orch.ValidateID("session_id", sessionID) != nil {
		return store.Session{}, 0, store.ErrNotFound
	}
	e, err := s.KV.Get(ctx, SessionKey(tenantID, sessionID))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return store.Session{}, 0, store.ErrNotFound
	}
	if err != nil {
		return store.Session{}, 0, fmt.Errorf("handlers: read session: %w", err)
	}
	var sess store.Session
	if err := json.Unmarshal(e.Value(), &sess); err != nil {
		return store.Session{}, 0, fmt.Errorf("handlers: decode session %s: %w", e.Key(), err)
	}
	return sess, e.Revision(), nil
}

// HistoryOf is a session's conversation as the models see it; nil for no
// session (a new one).
func HistoryOf(sess *store.Session) []llm.HistoryMessage {
	if sess == nil || len(sess.Messages) == 0 {
		return nil
	}
	out := make([]llm.HistoryMessage, len(sess.Messages))
	for i, m := range sess.Messages {
		out[i] = llm.HistoryMessage{Role: m.Role, Content: m.Content}
	}
	return out
}

// Append adds a finished run's user message and answer to its session
// (compare-and-swap, so concurrent runs of a session both land) and
// returns the event that records it. A redelivered end appends nothing
// twice: the exchange is found by its run id. fresh says the run found
// the session empty: the first attempt then creates it without reading.
func (s *Sessions) Append(ctx context.Context, req orch.RunRequest, answer string, at time.Time, fresh bool) (SessionUpdated, error) {
	return s.AppendChange(ctx, req, answer, at, fresh, nil)
}

// AppendChange is Append that also applies what the run's end does to
// the session (its status, current agent, handoff depth and reason, one
// more agent turn), once with the exchange.
func (s *Sessions) AppendChange(ctx context.Context, req orch.RunRequest, answer string, at time.Time, fresh bool,
	change *orch.SessionChange) (SessionUpdated, error) {
	return s.AppendSummarised(ctx, req, answer, at, fresh, change, nil)
}

// AppendSummarised is AppendChange with the summary a model wrote of the
// turns the exchange folds out of the agent's history window (Folding):
// it replaces the extractive one when the session, as the write finds
// it, folds exactly the turns it covers. A nil written folds
// extractively.
func (s *Sessions) AppendSummarised(ctx context.Context, req orch.RunRequest, answer string, at time.Time, fresh bool,
	change *orch.SessionChange, written *Summary) (SessionUpdated, error) {
	var known *kvcas.Entry[store.Session]
	if fresh {
		known = &kvcas.Entry[store.Session]{}
	}
	e, err := kvcas.UpdateFrom(ctx, s.KV, SessionKey(req.TenantID, req.SessionID), known, func(sess *store.Session, rev uint64) (bool, error) {
		if rev == 0 {
			*sess = store.Session{SessionID: req.SessionID, TenantID: req.TenantID, UserID: req.UserID,
				State: "active", StartedAt: at}
		}
		var window *orch.HistoryWindow
		if change != nil {
			window = change.Window
		}
		if !appendSummarised(sess, req, answer, at, window, written) {
			return false, nil // a redelivered end: the exchange is in
		}
		applyChange(sess, change, req.RunID, at)
		return true, nil
	})
	if err != nil {
		return SessionUpdated{}, fmt.Errorf("handlers: session: %w", err)
	}
	return SessionUpdated{RunID: req.RunID, UserID: req.UserID, Message: req.Message, Answer: answer,
		Revision: e.Revision, Session: e.Value}, nil
}

// HandOff marks the session of a run handed to a human: handed_off with
// the packet a reply answers (compare-and-swap; idempotent by gate). It
// returns the event that records it.
func (s *Sessions) HandOff(ctx context.Context, req orch.RunRequest, change orch.SessionChange, at time.Time) (SessionUpdated, error) {
	e, err := kvcas.Update(ctx, s.KV, SessionKey(req.TenantID, req.SessionID), func(sess *store.Session, rev uint64) (bool, error) {
		if rev == 0 {
			*sess = store.Session{SessionID: req.SessionID, TenantID: req.TenantID, UserID: req.UserID, StartedAt: at}
		}
		if h := sess.Handoff; sess.State == orch.SessionHandedOff && h != nil && h.GateID == change.GateID {
			return false, nil // a redelivered hop
		}
		applyChange(sess, &change, req.RunID, at)
		return true, nil
	})
	if err != nil {
		return SessionUpdated{}, fmt.Errorf("handlers: session: %w", err)
	}
	return SessionUpdated{RunID: req.RunID, UserID: req.UserID, Message: req.Message, HandedOff: true,
		Revision: e.Revision, Session: e.Value}, nil
}

// applyChange sets what run runID's end or handoff does to its session.
// A session another run handed to a human stays handed off until that
// run's reply.
func applyChange(sess *store.Session, c *orch.SessionChange, runID string, at time.Time) {
	if c == nil {
		return
	}
	if h := sess.Handoff; sess.State == orch.SessionHandedOff && h != nil && h.RunID != runID {
		if c.AgentTurn {
			sess.TurnCount++
		}
		return
	}
	sess.State = c.Status
	if sess.EndedBy == runID && !sess.EndedAt.IsZero() && c.Status == orch.SessionActive {
		// Its agent ended the conversation (end_conversation) during
		// this run: the run's end does not reopen it.
		sess.State = orch.SessionCompleted
	}
	if c.AgentID != "" && continuesFrom(sess, c) {
		sess.AgentID, sess.ParentAgentID, sess.HandoffDepth, sess.HandoffChain = c.AgentID, c.ParentAgentID, c.Depth, c.Chain
		sess.Stage, sess.LoadedSkills = c.Stage, c.Skills
	}
	if c.Reason != "" {
		sess.HandoffReason = c.Reason
	}
	if c.AgentTurn {
		sess.TurnCount++
	}
	sess.Handoff = nil
	if q := sess.Clarify; q != nil && q.RunID == runID {
		sess.Clarify = nil // the run that asked no longer waits
	}
	if h := c.Handoff; h != nil && c.Status == orch.SessionHandedOff {
		sess.Handoff = &store.SessionHandoff{RunID: c.RunID, GateID: c.GateID, Reason: h.Reason, Priority: h.Priority,
			Summary: h.Summary, Context: h.Context, Agents: h.Agents, Trigger: h.Trigger, At: at}
	}
	if sess.State == orch.SessionCompleted && sess.EndedAt.IsZero() {
		sess.EndedAt, sess.EndedBy = at, runID
	}
}

// continuesFrom reports whether the run whose end c is went on from the
// session's current agent (it is in the run's chain): an operator who
// handed the session to another agent while the run was going keeps the
// last word on who answers next.
func continuesFrom(sess *store.Session, c *orch.SessionChange) bool {
	chain := c.Chain
	if len(chain) == 0 {
		chain = []string{c.AgentID}
	}
	return sess.AgentID == "" || slices.Contains(chain, sess.AgentID)
}

// appendExchange appends the exchange of req to sess and condenses what
// falls out of the window (the agent's, else the default bounds). It
// reports false when the exchange is already there.
func appendExchange(sess *store.Session, req orch.RunRequest, answer string, at time.Time, window *orch.HistoryWindow) bool {
	return appendSummarised(sess, req, answer, at, window, nil)
}

// appendSummarised is appendExchange with a model's summary of the turns
// an agent's window folds (condenseWindow).
func appendSummarised(sess *store.Session, req orch.RunRequest, answer string, at time.Time, window *orch.HistoryWindow,
	written *Summary) bool {
	if !addExchange(sess, req, answer, at) {
		return false
	}
	if window != nil {
		condenseWindow(sess, window.Resolved(), written)
	} else {
		Condense(sess)
	}
	return true
}

// addExchange appends the messages of req's exchange to sess; it reports
// false when they are already there.
func addExchange(sess *store.Session, req orch.RunRequest, answer string, at time.Time) bool {
	userID := req.RunID + ".user"
	for _, m := range sess.Messages {
		if m.MsgID == userID {
			return false
		}
	}
	sess.LastActive = at
	sess.Messages = append(sess.Messages,
		store.SessionMessage{MsgID: userID, Role: RoleUser, Content: Clip(req.Message, HistoryMessageBytes), TS: at},
		store.SessionMessage{MsgID: req.RunID + ".assistant", Role: RoleAssistant, Content: Clip(answer, HistoryMessageBytes), TS: at})
	return true
}

// Clip cuts s to at most n bytes on a rune boundary, marking the cut.
func Clip(s string, n int) string { return text.Clip(s, n) }

// Update applies an operator's change to a session of tenantID
// (compare-and-swap, so it never overwrites a run's write): change checks
// the session as stored and changes it, or returns an error, which is
// returned with nothing written. A missing session is store.ErrNotFound.
func (s *Sessions) Update(ctx context.Context, tenantID, sessionID string, change func(*store.Session) error) (store.Session, uint64, error) {
	if orch.ValidateID("tenant_id", tenantID) != nil || orch.ValidateID("session_id", sessionID) != nil {
		return store.Session{}, 0, store.ErrNotFound
	}
	e, err := kvcas.Update(ctx, s.KV, SessionKey(tenantID, sessionID), func(sess *store.Session, rev uint64) (bool, error) {
		if rev == 0 {
			return false, store.ErrNotFound
		}
		if err := change(sess); err != nil {
			return false, err
		}
		return true, nil
	})
	if err != nil {
		return store.Session{}, 0, err
	}
	return e.Value, e.Revision, nil
}

// Condense keeps the session's last HistoryKeep messages and folds the
// older ones into its summary message.
func Condense(sess *store.Session) {
	summary, kept := splitSummary(sess.Messages)
	if len(kept) <= HistoryKeep {
		return
	}
	fold(&summary, kept[:len(kept)-HistoryKeep], HistorySummaryBytes)
	sess.Messages = append([]store.SessionMessage{summary}, kept[len(kept)-HistoryKeep:]...)
}

// CondenseWindow condenses the session to an agent's history window w
// (resolved): the session's first message stays verbatim; once the
// session has had more than w.SummarizeAfter turns, the messages before
// the last 2×SummarizeAfter (at most MaxMessages in all) are folded into
// the summary; and older ones are folded until everything fits in
// w.MaxTokens (four bytes a token), keeping at least the last exchange.
// The condensed session reads first, summary, then the recent messages.
func CondenseWindow(sess *store.Session, w orch.HistoryWindow) { condenseWindow(sess, w, nil) }

// condenseWindow is CondenseWindow whose summary is written, when it
// covers exactly the messages folded, else extractive.
func condenseWindow(sess *store.Session, w orch.HistoryWindow, written *Summary) {
	c, ok := windowCut(sess.Messages, w)
	if !ok {
		return
	}
	folded := c.rest[:c.cut]
	if written.covers(folded) {
		c.summary.Content, c.summary.TS = Clip(written.Text, c.summaryCap), folded[len(folded)-1].TS
	} else {
		fold(&c.summary, folded, c.summaryCap)
	}
	sess.Messages = append([]store.SessionMessage{c.first, c.summary}, c.rest[c.cut:]...)
}

// splitSummary returns the summary message of msgs (a new, empty one if
// there is none) and the others, in order.
func splitSummary(msgs []store.SessionMessage) (store.SessionMessage, []store.SessionMessage) {
	summary := store.SessionMessage{MsgID: "summary", Role: RoleSummary}
	kept := msgs[:0:0]
	for _, m := range msgs {
		if m.Role == RoleSummary {
			summary = m
			continue
		}
		kept = append(kept, m)
	}
	return summary, kept
}

// fold adds a line per message of old to the summary, keeping its last
// lines within limit bytes.
func fold(summary *store.SessionMessage, old []store.SessionMessage, limit int) {
	summary.Content = llm.ExtractiveSummary(summaryInput(*summary, old, limit))
	if len(old) > 0 {
		summary.TS = old[len(old)-1].TS
	}
}

// size is the bytes of the messages' contents.
func size(msgs []store.SessionMessage) int {
	n := 0
	for _, m := range msgs {
		n += len(m.Content)
	}
	return n
}
