package runctl

import (
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
