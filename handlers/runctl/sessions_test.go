package runctl

import (
	"fmt"
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
