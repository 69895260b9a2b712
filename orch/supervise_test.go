package orch

import (
	"slices"
	"strings"
	"testing"

	"github.com/agentbus/agentbus/domain"
)

// leadAgent is a supervisor agent over a researcher (outlet_list) and a
// writer (engagement_analytics); agent-gone is one of its sub_agents that
// was not active when the run started, so it is not a member.
func leadAgent() *AgentDef {
	member := func(id, tool string) AgentDef {
		return AgentDef{ID: id, Version: 1, Name: "Agent " + id, Type: "standard", Instructions: "You are " + id + ".",
			Tools: []string{tool}}
	}
	return &AgentDef{ID: "agent-lead", Version: 2, Name: "Lead", Type: AgentSupervisor, Instructions: "Lead the analysis.",
		Tools: []string{}, SubAgents: []string{"agent-res", "agent-wri", "agent-gone"},
		Members: []AgentDef{member("agent-res", "outlet_list"), member("agent-wri", "engagement_analytics")}}
}

// lane is a supervisor's lane i assigned to agent, with skills.
func lane(i int, agent string, skills ...string) Step {
	return Step{Index: i, Task: "lane goal", Skills: skills, ReturnSpec: shape, Loop: &Loop{MaxTurns: 5, SessionID: "s1-lane", AgentID: agent}}
}

// supervisorRun is the state of a run acting as a, routed to pattern
// (the routing model's choice).
func supervisorRun(t *testing.T, a *AgentDef, pattern string) (State, Decision) {
	t.Helper()
	req := request("run-sup-agent")
	req.AgentID = a.ID
	d := Decide(State{}, Requested{Request: req, Agent: a, TaskTypes: taskTypes,
		Patterns: []domain.Pattern{{Name: PatternSupervisor, MaxIterations: 6, MaxLanes: 4}},
		Route:    domain.Route{TaskType: "general", Pattern: pattern, Reason: "scripted"}, At: t0})
	return only[PlanRequest](t, d).Run, d
}

// A run acting as a supervisor agent runs the supervisor pattern whatever
// the routing model chose, and each lane runs as the sub-agent it is
// assigned to: its skills are cut to that sub-agent's tools, and the
// fan-out records the assignment.
func TestDecideSupervisorAgentRunsEachLaneAsItsSubAgent(t *testing.T) {
	run, d := supervisorRun(t, leadAgent(), PatternReact)
	if run.Pattern != PatternSupervisor || run.PatternDef.MaxLanes != 4 {
		t.Fatalf("pattern %q (%+v), want the supervisor pattern", run.Pattern, run.PatternDef)
	}
	for _, a := range d.Audits {
		p, _ := a.Payload.(map[string]any)
		switch a.Name {
		case "routing.decided":
			if p["pattern"] != PatternSupervisor || !strings.Contains(p["reason"].(string), "agent agent-lead supervises") {
				t.Fatalf("routing.decided %v", p)
			}
		case "agent.selected":
			if !slices.Equal(p["members"].([]string), []string{"agent-res", "agent-wri"}) {
				t.Fatalf("agent.selected %v, want its two members", p)
			}
		}
	}
	pd := Decide(run, Planned{Proposal: PlanProposal{Steps: []Step{
		lane(1, "agent-res", "outlet_list", "engagement_analytics"), lane(2, "agent-wri", "engagement_analytics")}}, At: t0})
	srs := stepRequests(pd)
	if len(srs) != 2 {
		t.Fatalf("%d lanes dispatched (audits %v), want 2", len(srs), auditNames(pd))
	}
	want := map[int][]string{1: {"outlet_list"}, 2: {"engagement_analytics"}}
	for _, sr := range srs {
		s := sr.Run.Plan.Live(sr.Step)
		if !slices.Equal(s.Skills, want[s.Index]) {
			t.Fatalf("lane %d (%s) has skills %v, want %v", s.Index, s.LaneAgent(), s.Skills, want[s.Index])
		}
	}
	var restricted, fanned map[string]any
	for _, a := range pd.Audits {
		switch a.Name {
		case "agent.tools_restricted":
			restricted = a.Payload.(map[string]any)
		case "fanout.started":
			fanned = a.Payload.(map[string]any)
		}
	}
	if restricted == nil || restricted["agent_id"] != "agent-res" || !slices.Equal(restricted["removed"].([]string), []string{"engagement_analytics"}) {
		t.Fatalf("agent.tools_restricted %v, want the writer's tool taken from the researcher's lane", restricted)
	}
	lanes := fanned["lanes"].([]map[string]any)
	if len(lanes) != 2 || lanes[0]["agent_id"] != "agent-res" || lanes[1]["agent_id"] != "agent-wri" {
		t.Fatalf("fanout.started lanes %v, want each with its sub-agent", lanes)
	}
}

// A supervisor agent's decomposition that assigns a lane to no sub-agent,
// to one it does not name, or to one that was not active when the run
// started is rejected before anything runs: the run replans. A lane of a
// run without a supervisor agent is assigned to none.
func TestDecideRefusesALaneOutsideTheSupervisorsSubAgents(t *testing.T) {
	for name, c := range map[string]struct {
		agent *AgentDef
		lane  Step
		why   string
	}{
		"unassigned":      {leadAgent(), lane(1, "", "outlet_list"), "a lane has none"},
		"not a sub-agent": {leadAgent(), lane(1, "agent-x", "outlet_list"), `does not name "agent-x"`},
		"inactive":        {leadAgent(), lane(1, "agent-gone", "outlet_list"), "was not active"},
		"no supervisor":   {nil, lane(1, "agent-res", "outlet_list"), "supervises no sub-agent"},
		"standard agent":  {agentDef(), lane(1, "agent-res", "outlet_list"), "supervises no sub-agent"},
	} {
		var run State
		if c.agent != nil {
			run, _ = supervisorRun(t, c.agent, PatternSupervisor)
		} else {
			run = only[PlanRequest](t, Decide(State{}, Requested{Request: request("run-plain"), TaskTypes: taskTypes,
				Route: domain.Route{TaskType: "general", Pattern: PatternSupervisor}, At: t0})).Run
		}
		d := Decide(run, Planned{Proposal: PlanProposal{Steps: []Step{c.lane}}, At: t0})
		pr := only[PlanRequest](t, d)
		if pr.Failure == nil || !strings.Contains(pr.Failure.Reason, c.why) || !slices.Contains(auditNames(d), "critic.plan_rejected") {
			t.Fatalf("%s: failure %+v (audits %v), want the plan rejected: %s", name, pr.Failure, auditNames(d), c.why)
		}
	}
}

// A run handed off to a supervisor agent goes on in the supervisor
// pattern: its next plan is a decomposition into lanes.
func TestDecideHandoffToASupervisorAgentSupervises(t *testing.T) {
	sr := agentLoop(t, "run-h-sup", chainAgent("A", "agent-lead"))
	pr := only[PlanRequest](t, handOff(sr, "agent-lead", leadAgent(), t0))
	if pr.Run.Agent == nil || pr.Run.Agent.ID != "agent-lead" || pr.Run.Pattern != PatternSupervisor {
		t.Fatalf("after the handoff: agent %+v, pattern %q", pr.Run.Agent, pr.Run.Pattern)
	}
	d := Decide(pr.Run, Planned{Proposal: PlanProposal{Steps: []Step{lane(nextIndexOf(pr.Run.Plan), "agent-wri", "engagement_analytics")}}, At: t0})
	if sr := only[StepRequest](t, d); sr.Run.Plan.Live(sr.Step).LaneAgent() != "agent-wri" {
		t.Fatalf("lane dispatched as %q", sr.Run.Plan.Live(sr.Step).LaneAgent())
	}
}

// A router agent that hands its message to a supervisor agent runs the
// supervisor pattern as that supervisor.
func TestDecideRouterAgentToASupervisorSupervises(t *testing.T) {
	front := &AgentDef{ID: "agent-front", Type: TypeRouterAgent, SubAgents: []string{"agent-lead"}}
	req := request("run-front-lead")
	req.AgentID = front.ID
	d := Decide(State{}, Requested{Request: req, Agent: front, TaskTypes: taskTypes,
		AgentRoute: &AgentRoute{SubAgent: leadAgent(), Reason: "a review", Options: []string{"agent-lead"}},
		Route:      domain.Route{TaskType: "general", Pattern: PatternReact}, At: t0})
	run := only[PlanRequest](t, d).Run
	if run.Agent == nil || run.Agent.ID != "agent-lead" || run.Pattern != PatternSupervisor || len(run.Agent.Members) != 2 {
		t.Fatalf("agent %+v, pattern %q: want the supervisor, with its members, supervising", run.Agent, run.Pattern)
	}
}
