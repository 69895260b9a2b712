package main

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// post sends body to the ingress as tenant, wants status and returns the
// answer's string fields.
func post(t *testing.T, url, tenant, body string, status int) map[string]any {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Tenant-Id", tenant)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != status {
		t.Fatalf("POST %s: %d %v %v, want %d", url, resp.StatusCode, out, err, status)
	}
	return out
}

// createAgent posts an agent definition to the ingress and returns its id.
func createAgent(t *testing.T, base, tenant, body string) string {
	t.Helper()
	id, _ := post(t, base+"/agent/agents", tenant, body, http.StatusCreated)["agent_id"].(string)
	return id
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

// TestTriggeredRunEndToEnd: an inbound event that matches a trigger
// starts a run as the trigger's agent, which answers the demo task.
func TestTriggeredRunEndToEnd(t *testing.T) {
	s := startStack(t)
	base := "http://" + s.IngressAddr
	agent := createAgent(t, base, "demo", `{"name":"Analyst","system_prompt":"Rank outlets.","tools":["outlet_list","engagement_analytics"]}`)
	post(t, base+"/agent/triggers", "demo", `{"name":"Ranking requests","agent_id":"`+agent+`","event_type":"message.new",
		"conditions":{"any":[{"field":"message.text","operator":"contains","value":"rank"}]}}`, http.StatusCreated)
	res := post(t, base+"/agent/events", "demo", `{"event_id":"evt-42","event_type":"message.new","user_id":"u1","session_id":"sess-trig",
		"data":{"message":{"text":"List the active outlets and rank them by engagement"}}}`, http.StatusAccepted)
	if res["agent_id"] != agent {
		t.Fatalf("event answer %v", res)
	}
	planID, _ := res["plan_id"].(string)
	plan, _ := finalPlan(t, s, "demo", planID)
	if plan.Status != store.PlanStatusComplete {
		t.Fatalf("triggered run's plan ended %s", plan.Status)
	}
	var agentSelected bool
	eventually(t, 10*time.Second, "the triggered run's trace", func() bool {
		evs, err := s.Deps.Store.Trace(context.Background(), store.TraceQuery{TenantID: "demo", PlanID: planID})
		if err != nil {
			return false
		}
		for _, e := range evs {
			agentSelected = agentSelected || e.EventType == "agent.selected"
		}
		return agentSelected
	})
}

// TestSupervisorAgentEndToEnd: through the whole stack with the offline
// model, a supervisor agent created with the API over a researcher
// (outlet_list) and a writer (menu_catalog) fans its task out as two
// lanes, each assigned to the sub-agent whose tool it needs and calling
// only that tool; the trace records the assignment.
func TestSupervisorAgentEndToEnd(t *testing.T) {
	s := startStack(t)
	base := "http://" + s.IngressAddr
	researcher := createAgent(t, base, "demo", `{"name":"Researcher","description":"Researches the brand's outlets",`+
		`"system_prompt":"List outlets with their ids.","tools":["outlet_list"]}`)
	writer := createAgent(t, base, "demo", `{"name":"Writer","description":"Writes up the menu",`+
		`"system_prompt":"Describe the menu.","tools":["menu_catalog"]}`)
	lead := createAgent(t, base, "demo", `{"name":"Lead","type":"supervisor","system_prompt":"Lead the review.",`+
		`"sub_agents":["`+researcher+`","`+writer+`"]}`)
	res := postRun(t, base, orch.RunRequest{TenantID: "demo", UserID: "u1", SessionID: "sess-lead",
		Message: "List the active outlets and show the menu catalog", AgentID: lead})
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("run as %s ended %s/%s: %s", lead, res.Status, res.TerminalCode, res.Response)
	}
	var lanes []map[string]any
	calls := map[string][]string{} // skills called, by task id
	eventually(t, 10*time.Second, "the run's trace", func() bool {
		evs, err := s.Deps.Store.Trace(context.Background(), store.TraceQuery{TenantID: "demo", PlanID: res.PlanID})
		if err != nil {
			return false
		}
		lanes, calls = nil, map[string][]string{}
		finished := false
		for _, e := range evs {
			switch e.EventType {
			case "fanout.started":
				var p struct {
					Lanes []map[string]any `json:"lanes"`
				}
				if json.Unmarshal(e.Payload, &p) == nil {
					lanes = p.Lanes
				}
			case "skill.called":
				calls[e.TaskID] = append(calls[e.TaskID], e.SkillID)
			}
			finished = finished || e.EventType == "run.finished"
		}
		return finished && len(lanes) > 0
	})
	want := map[string]string{researcher: "outlet_list", writer: "menu_catalog"}
	if len(lanes) != 2 {
		t.Fatalf("fan-out lanes %v, want 2", lanes)
	}
	for _, l := range lanes {
		agent, _ := l["agent_id"].(string)
		task, _ := l["task_id"].(string)
		tool, ok := want[agent]
		if !ok || len(calls[task]) == 0 || slices.ContainsFunc(calls[task], func(s string) bool { return s != tool }) {
			t.Fatalf("lane %v ran as %q and called %v, want only %s", l, agent, calls[task], tool)
		}
		delete(want, agent)
	}
	// The supervisor synthesises both lanes' findings, in its own name.
	if !strings.HasPrefix(res.Response, "Lead — ") || !strings.Contains(res.Response, "Harbour Front (out-001)") ||
		!strings.Contains(res.Response, "Lane 2 — ") {
		t.Fatalf("answer %q", res.Response)
	}
}
