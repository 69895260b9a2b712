package main

import (
	"context"
	"strings"
	"testing"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/orch"
)

// A forged event of every consumed type, each with one field missing or
// wrong, is dead-lettered on its first delivery with a reason naming the
// field, and the consumers keep serving.
func TestForgedEventsAreDeadLetteredAtOnce(t *testing.T) {
	s := startStack(t)
	ctx := context.Background()
	js := s.Deps.JS
	run := func(mod func(*orch.RunState)) orch.RunState {
		r := orch.RunState{Request: orch.RunRequest{RunID: "run-forged", TenantID: "acme", UserID: "u", SessionID: "s1", Message: "m"},
			Plan: orch.Plan{PlanID: "plan-forged", Status: orch.PlanExecuting,
				Steps: []orch.Step{{Index: 1, Task: "t", Status: orch.StepRunning, TaskID: "task-f"}}}, Seq: 2}
		if mod != nil {
			mod(&r)
		}
		return r
	}
	group := orch.Group{ID: "grp-f", Expected: 1}
	cases := []struct {
		name, typ, field string
		data             any
	}{
		{"request without run id", events.TypeRunRequested, "run_id",
			orch.RunRequest{TenantID: "acme", UserID: "u", SessionID: "s1", Message: "m"}},
		{"request with an unknown field", events.TypeRunRequested, "evil",
			map[string]any{"run_id": "r", "tenant_id": "acme", "user_id": "u", "session_id": "s1", "message": "m", "evil": true}},
		{"plan request without plan id", events.TypePlanRequested, "plan_id",
			orch.PlanRequest{Run: run(func(r *orch.RunState) { r.Plan.PlanID = "" })}},
		{"proposal with step 0", events.TypePlanProposed, "steps[0]",
			orch.PlanProposal{Run: run(nil), Steps: []orch.Step{{Index: 0, Task: "t"}}}},
		{"step request without group", events.TypeStepRequested, "group.id",
			orch.StepRequest{Run: run(nil), Step: 1}},
		{"iteration of a step not in the plan", events.TypeStepIterated, "step",
			orch.StepRequest{Run: run(nil), Step: 9, Group: group}},
		{"finished step with an unknown outcome", events.TypeStepFinished, "outcome",
			orch.StepFinished{Run: run(nil), Group: group, Result: orch.StepResult{Step: 1, Outcome: "exploded"}}},
		{"joined group without plan id", events.TypeGroupJoined, "plan_id",
			orch.GroupJoined{Run: run(func(r *orch.RunState) { r.Plan.PlanID = "" }), Group: group,
				Results: []orch.StepResult{{Step: 1, Outcome: orch.OutcomeComplete}}}},
		{"joined group of another tenant", events.TypeGroupJoined, "tenant",
			orch.GroupJoined{Run: run(func(r *orch.RunState) { r.Request.TenantID = "globex" }), Group: group,
				Results: []orch.StepResult{{Step: 1, Outcome: orch.OutcomeComplete}}}},
		{"audit event with a number for plan id", events.AuditType("step_1.started"), "plan_id",
			map[string]any{"plan_id": 5}},
	}
	for i, tc := range cases {
		ev, err := events.New("forged-"+tc.name, tc.typ, events.Meta{Tenant: "acme", Session: "s1"}, tc.data)
		if err != nil {
			t.Fatal(err)
		}
		if err := events.Publish(ctx, js, ev); err != nil {
			t.Fatal(err)
		}
		dls := waitDeadLetter(t, js, "agent.dead.acme", i+1)
		dl := dls[i]
		if dl.Deliveries != 1 || !strings.Contains(dl.Reason, tc.field) || !json.Valid(dl.Original) {
			t.Errorf("%s: dead letter after %d deliveries, reason %q; want the first delivery and a reason naming %s",
				tc.name, dl.Deliveries, dl.Reason, tc.field)
		}
	}

	// A subject naming one tenant with a tenantid naming another.
	ev, _ := events.New("forged-cross-tenant", events.TypeRunRequested, events.Meta{Tenant: "globex", Session: "s1"},
		orch.RunRequest{RunID: "run-x", TenantID: "globex", UserID: "u", SessionID: "s1", Message: "m"})
	m, err := events.ToMsg(ev)
	if err != nil {
		t.Fatal(err)
	}
	m.Subject = "agent.run.requested.acme"
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	dls := waitDeadLetter(t, js, "agent.dead.acme", len(cases)+1)
	if dl := dls[len(cases)]; dl.Deliveries != 1 || !strings.Contains(dl.Reason, "tenantid") {
		t.Errorf("cross-tenant event: dead letter after %d deliveries, reason %q", dl.Deliveries, dl.Reason)
	}

	res := postRun(t, "http://"+s.IngressAddr, orch.RunRequest{TenantID: "acme", UserID: "u", SessionID: "s2",
		Message: "List the active outlets and rank them by engagement"})
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("consumers stopped serving after forged events: %+v", res)
	}
}
