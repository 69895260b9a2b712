package main

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// createAgent posts an agent definition to the ingress and returns its id.
func createAgent(t *testing.T, base, tenant, body string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, base+"/agent/agents", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Tenant-Id", tenant)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		AgentID string `json:"agent_id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /agent/agents: %d %v", resp.StatusCode, err)
	}
	return out.AgentID
}

// TestRunActsAsItsAgent: through the whole stack, a run that names an
// agent created with the API runs with the agent's tools only; an agent
// allowed both demo skills answers the demo task as usual.
func TestRunActsAsItsAgent(t *testing.T) {
	s := startStack(t)
	base := "http://" + s.IngressAddr
	full := createAgent(t, base, "demo", `{"name":"Analyst","system_prompt":"Rank outlets.","tools":["outlet_list","engagement_analytics"],"max_turns":5}`)
	res := postRun(t, base, orch.RunRequest{TenantID: "demo", UserID: "u1", SessionID: "sess-agent-1",
		Message: "List the active outlets and rank them by engagement", AgentID: full})
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("run as %s ended %s/%s: %s", full, res.Status, res.TerminalCode, res.Response)
	}
	assertRanked(t, res.Response, expectedRanking(t, s.SkillsURL, "demo"))

	listOnly := createAgent(t, base, "demo", `{"name":"Lister","system_prompt":"List outlets.","tools":["outlet_list"]}`)
	res = postRun(t, base, orch.RunRequest{TenantID: "demo", UserID: "u1", SessionID: "sess-agent-2",
		Message: "List the active outlets and rank them by engagement", AgentID: listOnly})
	if res.TerminalCode == "" {
		t.Fatalf("run as %s did not end: %+v", listOnly, res)
	}
	plan, _ := finalPlan(t, s, "demo", res.PlanID)
	for _, st := range plan.Steps {
		for _, sk := range st.Skills {
			if sk != "outlet_list" {
				t.Fatalf("step %d of a run as %s has skill %s outside its tools", st.StepIndex, listOnly, sk)
			}
		}
	}
	var called []string
	eventually(t, 10*time.Second, "the run's trace", func() bool {
		evs, err := s.Deps.Store.Trace(context.Background(), store.TraceQuery{TenantID: "demo", PlanID: res.PlanID})
		if err != nil {
			return false
		}
		called = called[:0]
		finished := false
		for _, e := range evs {
			if e.EventType == "skill.called" {
				called = append(called, e.SkillID)
			}
			finished = finished || e.EventType == "run.finished"
		}
		return finished && len(called) > 0
	})
	if len(called) == 0 || slices.ContainsFunc(called, func(s string) bool { return s != "outlet_list" }) {
		t.Fatalf("skills called %v, want outlet_list only", called)
	}
}
