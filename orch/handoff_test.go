package orch

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/domain"
)

// chainAgent is agent id, which may hand off to subs.
func chainAgent(id string, subs ...string) *AgentDef {
	return &AgentDef{ID: id, Version: 1, Name: "Agent " + id, Type: "standard", Instructions: "You are " + id + ".",
		Tools: []string{"outlet_list"}, SubAgents: subs}
}

// agentLoop starts a ReACT run acting as a and returns the loop step's
// request.
func agentLoop(t *testing.T, runID string, a *AgentDef) StepRequest {
	t.Helper()
	req := request(runID)
	req.AgentID = a.ID
	run := only[PlanRequest](t, Decide(State{}, Requested{Request: req, Agent: a, TaskTypes: taskTypes,
		Route: domain.Route{TaskType: "general", Pattern: PatternReact}, At: t0})).Run
	return only[StepRequest](t, Decide(run, Planned{Proposal: PlanProposal{Steps: []Step{loopStep(nextIndexOf(run.Plan))}}, At: t0}))
}

func loopStep(idx int) Step {
	return Step{Index: idx, Task: "rank the outlets", Skills: []string{"outlet_list"}, ReturnSpec: shape, Loop: &Loop{MaxTurns: 5}}
}

func nextIndexOf(p Plan) int {
	n := 1
	for _, s := range p.Steps {
		n = max(n, s.Index+1)
	}
	return n
}

// handOff joins sr's step with a handoff to target (loaded as def).
func handOff(sr StepRequest, target string, def *AgentDef, at time.Time) Decision {
	res := StepResult{Step: sr.Step, TaskID: sr.Run.Plan.Live(sr.Step).TaskID, Outcome: OutcomeHandoff, Reason: "handoff",
		Handoff: &Handoff{To: HandoffToAgent, TargetAgentID: target, Reason: "needs " + target,
			Context: json.RawMessage(`{"order":"ORD-1"}`)}}
	return Decide(sr.Run, Joined{Group: sr.Group, Results: []StepResult{res}, Target: def, At: at})
}

// A chain A → B → C → D is accepted, each handoff recorded with its
// depth and the run acting as its target; a fourth handoff is refused and
// ends the run PERMISSION_DENIED.
func TestDecideHandoffChainOfDepthThreeThenRefused(t *testing.T) {
	defs := map[string]*AgentDef{"A": chainAgent("A", "B"), "B": chainAgent("B", "C"), "C": chainAgent("C", "D"),
		"D": chainAgent("D", "E"), "E": chainAgent("E")}
	sr := agentLoop(t, "run-h1", defs["A"])
	for depth, target := range []string{"B", "C", "D"} {
		d := handOff(sr, target, defs[target], t0.Add(time.Duration(depth+1)*time.Second))
		pr := only[PlanRequest](t, d)
		run := pr.Run
		if run.Agent == nil || run.Agent.ID != target || len(run.Handoffs) != depth+1 || run.Handoffs[depth].Depth != depth+1 ||
			run.Handoffs[depth].To != target || string(run.Handoffs[depth].Context) != `{"order":"ORD-1"}` {
			t.Fatalf("after handoff to %s: agent %+v, chain %+v", target, run.Agent, run.Handoffs)
		}
		if p := run.Context.Persona; p == nil || p.Instructions != "You are "+target+"." {
			t.Fatalf("persona %+v, want only %s's instructions", p, target)
		}
		if h := run.Context.History; len(h) == 0 || !strings.Contains(h[len(h)-1].Content, "needs "+target) ||
			!strings.Contains(h[len(h)-1].Content, "ORD-1") {
			t.Fatalf("history %+v lacks the handoff's reason and context", h)
		}
		if pr.Failure == nil || pr.Failure.Outcome != OutcomeHandoff || run.Plan.Live(sr.Step) != nil {
			t.Fatalf("the handing-off step is not replaced: failure %+v, plan %+v", pr.Failure, run.Plan.Steps)
		}
		if e := d.Emits[0]; e.Key != fmt.Sprintf("handoff/%d", depth+1) {
			t.Fatalf("emit key %s", e.Key)
		}
		if !slices.Contains(auditNames(d), "handoff.accepted") {
			t.Fatalf("audits %v", auditNames(d))
		}
		sr = only[StepRequest](t, Decide(run, Planned{Proposal: PlanProposal{Steps: []Step{loopStep(nextIndexOf(run.Plan))}}, At: t0}))
	}
	d := handOff(sr, "E", defs["E"], t0.Add(time.Minute))
	res := only[RunResult](t, d)
	if res.TerminalCode != CodePermissionDenied || !strings.Contains(res.Reason, "depth 4") {
		t.Fatalf("fourth handoff: %s %q", res.TerminalCode, res.Reason)
	}
	if !slices.Contains(auditNames(d), "handoff.refused") || d.Session == nil || d.Session.AgentID != "D" || d.Session.Depth != 3 {
		t.Fatalf("audits %v, session %+v", auditNames(d), d.Session)
	}
}

// A handoff back to an agent of the chain, to an agent the current one
// does not name, or to one the router could not load is refused.
func TestDecideHandoffRefusals(t *testing.T) {
	a, b := chainAgent("A", "B"), chainAgent("B", "A")
	sr := agentLoop(t, "run-h2", a)
	run := only[PlanRequest](t, handOff(sr, "B", b, t0.Add(time.Second))).Run
	sr = only[StepRequest](t, Decide(run, Planned{Proposal: PlanProposal{Steps: []Step{loopStep(nextIndexOf(run.Plan))}}, At: t0}))
	cases := []struct {
		name, target string
		def          *AgentDef
		err, want    string
	}{
		{"cycle", "A", a, "", "already in the handoff chain [A B]"},
		{"not a sub-agent", "X", chainAgent("X"), "", `does not name "X" in its sub_agents`},
	}
	for _, c := range cases {
		res := only[RunResult](t, handOff(sr, c.target, c.def, t0.Add(2*time.Second)))
		if res.TerminalCode != CodePermissionDenied || !strings.Contains(res.Reason, c.want) {
			t.Errorf("%s: %s %q, want %q", c.name, res.TerminalCode, res.Reason, c.want)
		}
	}
	sr2 := agentLoop(t, "run-h3", a)
	r := StepResult{Step: sr2.Step, Outcome: OutcomeHandoff, Handoff: &Handoff{To: HandoffToAgent, TargetAgentID: "B", Reason: "x"}}
	res := only[RunResult](t, Decide(sr2.Run, Joined{Group: sr2.Group, Results: []StepResult{r}, TargetError: "agent \"B\" is inactive, not active", At: t0}))
	if res.TerminalCode != CodePermissionDenied || !strings.Contains(res.Reason, "inactive") {
		t.Errorf("unloadable target: %s %q", res.TerminalCode, res.Reason)
	}
}

// A human handoff parks the run at a human gate with its packet and the
// session handed off; the human's reply is the run's answer and the
// session is active again (completed when the human ends it).
func TestDecideHumanHandoffParksAndResumesOnReply(t *testing.T) {
	for _, end := range []bool{false, true} {
		sr := agentLoop(t, "run-h4", chainAgent("A"))
		r := StepResult{Step: sr.Step, Outcome: OutcomeHandoff, Handoff: &Handoff{To: HandoffToHuman, Reason: "asks for a person",
			Priority: "high", Context: json.RawMessage(`{"mood":"upset"}`)}}
		d := Decide(sr.Run, Joined{Group: sr.Group, Results: []StepResult{r}, At: t0.Add(time.Second)})
		if d.Opened == nil || d.Opened.Kind != GateHuman || d.Opened.Handoff == nil || d.Ended != nil {
			t.Fatalf("not parked at a human gate: %+v", d.Opened)
		}
		parked := emitted[RunParked](d)
		if len(parked) != 1 || parked[0].Gate.Handoff == nil || parked[0].Gate.Handoff.Priority != "high" ||
			!strings.Contains(parked[0].Gate.Handoff.Summary, "rank the outlets") || !slices.Equal(parked[0].Gate.Handoff.Agents, []string{"A"}) {
			t.Fatalf("parked %+v", parked)
		}
		if s := d.Session; s == nil || s.Status != SessionHandedOff || s.GateID != d.Opened.ID || s.Handoff.Reason != "asks for a person" {
			t.Fatalf("session change %+v", d.Session)
		}
		if !slices.Contains(auditNames(d), "session.handoff.human") {
			t.Fatalf("audits %v", auditNames(d))
		}
		done := Decide(d.State, GateResolved{Gate: d.Opened.ID, Decision: GateApproved, By: "agent-jo", Comment: "Refund issued.",
			EndSession: end, At: t0.Add(time.Hour / 2)})
		res := only[RunResult](t, done)
		want := SessionActive
		if end {
			want = SessionCompleted
		}
		if res.TerminalCode != CodeSuccess || res.Response != "Refund issued." || done.Session == nil ||
			done.Session.Status != want || done.Session.AgentTurn {
			t.Fatalf("after the reply (end %v): %s %q, session %+v", end, res.TerminalCode, res.Response, done.Session)
		}
		// Nobody replies before the gate expires: REVIEW_REQUIRED, and
		// the session is active again.
		exp := Decide(d.State, GateResolved{Gate: d.Opened.ID, Decision: GateExpired, At: d.Opened.ExpiresAt})
		if res := only[RunResult](t, exp); res.TerminalCode != CodeReviewRequired || !strings.Contains(res.Reason, "no human replied") ||
			exp.Session.Status != SessionActive || exp.Session.AgentTurn {
			t.Fatalf("expired: %s %q, session %+v", res.TerminalCode, res.Reason, exp.Session)
		}
	}
}

// A session at its agent's max_turns: escalate parks the run at a human
// gate before any model call; end ends it and completes the session.
func TestDecideTurnLimit(t *testing.T) {
	for _, behavior := range []string{HandoffEscalate, HandoffEnd} {
		a := chainAgent("A")
		a.MaxTurns, a.HandoffBehavior = 2, behavior
		req := request("run-t-" + behavior)
		req.AgentID = "A"
		d := Decide(State{}, Requested{Request: req, Agent: a, SessionTurns: 2, TaskTypes: taskTypes,
			Route: domain.Route{TaskType: "general", Pattern: PatternReact}, At: t0})
		if len(emitted[PlanRequest](d)) != 0 {
			t.Fatalf("%s: the run planned past the turn limit", behavior)
		}
		switch behavior {
		case HandoffEscalate:
			if d.Opened == nil || d.Opened.Kind != GateHuman || d.Opened.Handoff.Trigger != "max_turns" || d.Session.Status != SessionHandedOff {
				t.Fatalf("escalate: opened %+v, session %+v", d.Opened, d.Session)
			}
		case HandoffEnd:
			res := only[RunResult](t, d)
			if res.TerminalCode != CodeBudgetExhausted || !strings.Contains(res.Reason, "limit of 2 turns") ||
				d.Session.Status != SessionCompleted {
				t.Fatalf("end: %s %q, session %+v", res.TerminalCode, res.Reason, d.Session)
			}
		}
	}
}
