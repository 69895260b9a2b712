package runctl

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// TestSessions_RunEndKeepsAnOperatorsAgentHandoff: a run's end writes its
// agent and chain to the session only if it went on from the session's
// current agent; an operator who handed the session to another agent
// while the run was going keeps it.
func TestSessions_RunEndKeepsAnOperatorsAgentHandoff(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		name    string
		current string
		change  orch.SessionChange
		want    string
	}{
		{"new session", "", orch.SessionChange{Status: orch.SessionActive, AgentID: "agent-a"}, "agent-a"},
		{"same agent", "agent-a", orch.SessionChange{Status: orch.SessionActive, AgentID: "agent-a"}, "agent-a"},
		{"the run handed off", "agent-a", orch.SessionChange{Status: orch.SessionActive, AgentID: "agent-b", Depth: 1,
			Chain: []string{"agent-a", "agent-b"}}, "agent-b"},
		{"operator handed off meanwhile", "agent-x", orch.SessionChange{Status: orch.SessionActive, AgentID: "agent-a"}, "agent-x"},
		{"operator handed off meanwhile, run handed off too", "agent-x", orch.SessionChange{Status: orch.SessionActive,
			AgentID: "agent-b", Depth: 1, Chain: []string{"agent-a", "agent-b"}}, "agent-x"},
	}
	for _, c := range cases {
		sess := store.Session{SessionID: "s", TenantID: "beta", State: orch.SessionActive, AgentID: c.current}
		applyChange(&sess, &c.change, "run-1", at)
		if sess.AgentID != c.want {
			t.Errorf("%s: agent %q, want %q", c.name, sess.AgentID, c.want)
		}
	}
}

// An agent's history window (seed 002): the session's first message stays
// verbatim; past summarize_after turns the older messages are folded into
// the summary, the last 2×summarize_after kept (at most max_messages in
// all); and the whole stays within max_tokens, folding more when the
// recent messages are long.
func TestCondenseWindowKeepsTheFirstMessageTheRecentTurnsAndTheBudget(t *testing.T) {
	at := time.Unix(0, 0).UTC()
	sess := &store.Session{}
	for i := 1; i <= 12; i++ {
		req := orch.RunRequest{RunID: fmt.Sprintf("run-%02d", i), Message: fmt.Sprintf("question %d", i)}
		appendExchange(sess, req, fmt.Sprintf("answer %d", i), at, &orch.HistoryWindow{MaxMessages: 8, SummarizeAfter: 2})
	}
	m := sess.Messages
	if len(m) != 6 || m[0].Content != "question 1" || m[1].Role != RoleSummary ||
		m[2].Content != "question 11" || m[5].Content != "answer 12" {
		t.Fatalf("condensed to %d messages: %+v", len(m), m)
	}
	if !strings.Contains(m[1].Content, "assistant: answer 1\n") || !strings.Contains(m[1].Content, "assistant: answer 10") {
		t.Fatalf("the summary does not fold turns 1 to 10: %q", m[1].Content)
	}
	// Within the window nothing is folded.
	short := &store.Session{}
	for i := 1; i <= 2; i++ {
		appendExchange(short, orch.RunRequest{RunID: fmt.Sprintf("s-%d", i), Message: "q"}, "a", at, &orch.HistoryWindow{SummarizeAfter: 2})
	}
	if len(short.Messages) != 4 || short.Messages[1].Role == RoleSummary {
		t.Fatalf("a session inside its window was condensed: %+v", short.Messages)
	}
	// A token budget of 100 (400 bytes) folds long recent answers too,
	// keeping the last exchange.
	long := &store.Session{}
	for i := 1; i <= 4; i++ {
		appendExchange(long, orch.RunRequest{RunID: fmt.Sprintf("l-%d", i), Message: fmt.Sprintf("q%d", i)}, strings.Repeat("x", 150), at,
			&orch.HistoryWindow{MaxTokens: 100, SummarizeAfter: 10})
	}
	if n := len(long.Messages); n != 4 || long.Messages[0].Content != "q1" || long.Messages[2].Content != "q4" || size(long.Messages) > 400+HistorySummaryBytes {
		t.Fatalf("within 100 tokens: %d messages %+v", n, long.Messages)
	}
}

// Folding names the turns a run's end would fold out of an agent's
// window; a summary written for exactly those turns replaces the
// extractive one, and one written for other turns (the session changed
// meanwhile) is passed over. A redelivered end folds nothing.
func TestFoldingAndAWrittenSummary(t *testing.T) {
	at := time.Unix(0, 0).UTC()
	w := orch.HistoryWindow{MaxMessages: 6, SummarizeAfter: 2}
	sess := store.Session{}
	for i := 1; i <= 2; i++ {
		appendExchange(&sess, orch.RunRequest{RunID: fmt.Sprintf("r%d", i), Message: fmt.Sprintf("q%d", i)}, fmt.Sprintf("a%d", i), at, &w)
	}
	third := orch.RunRequest{RunID: "r3", Message: "q3"}
	in, covers := Folding(sess, third, "a3", w)
	if len(covers) != 1 || covers[0] != "r1.assistant" || len(in.History) != 1 || in.History[0].Content != "a1" || in.MaxBytes != HistorySummaryBytes {
		t.Fatalf("folding %+v covers %v", in, covers)
	}
	if len(sess.Messages) != 4 {
		t.Fatalf("Folding changed the session: %+v", sess.Messages)
	}
	written := sess
	written.Messages = slices.Clone(sess.Messages)
	appendSummarised(&written, third, "a3", at, &w, &Summary{Text: "the user asked twice", Covers: covers})
	if m := written.Messages; len(m) != 6 || m[0].Content != "q1" || m[1].Role != RoleSummary || m[1].Content != "the user asked twice" {
		t.Fatalf("with the written summary: %+v", m)
	}
	other := sess
	other.Messages = slices.Clone(sess.Messages)
	appendSummarised(&other, third, "a3", at, &w, &Summary{Text: "stale", Covers: []string{"r0.assistant"}})
	if m := other.Messages; m[1].Content != "assistant: a1" {
		t.Fatalf("a summary of other turns was kept: %+v", m)
	}
	if _, covers := Folding(written, third, "a3", w); covers != nil {
		t.Fatalf("a redelivered end folds %v", covers)
	}
}
