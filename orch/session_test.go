package orch

import (
	"slices"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/domain"
)

// sessionLoop starts a ReACT run of req acting as a in session s and
// returns the loop step's request.
func sessionLoop(t *testing.T, req RunRequest, a *AgentDef, s *SessionState) StepRequest {
	t.Helper()
	run := only[PlanRequest](t, Decide(State{}, Requested{Request: req, Agent: a, Session: s, TaskTypes: taskTypes,
		Route: domain.Route{TaskType: "general", Pattern: PatternReact}, At: t0})).Run
	return only[StepRequest](t, Decide(run, Planned{Proposal: PlanProposal{Steps: []Step{loopStep(nextIndexOf(run.Plan))}}, At: t0}))
}

// A run in a session handed A → B → C continues as C with the chain, so
// one more handoff reaches depth 3 and a fourth, in the next run, is
// refused: the depth limit holds across the session's runs. The run names
// the session's original agent (A), its current one (C) or none alike.
func TestDecideSessionContinuesWithItsAgentAndChain(t *testing.T) {
	defs := map[string]*AgentDef{"A": chainAgent("A", "B"), "B": chainAgent("B", "C"), "C": chainAgent("C", "D"),
		"D": chainAgent("D", "E"), "E": chainAgent("E")}
	sess := &SessionState{Status: SessionActive, AgentID: "C", Chain: []string{"A", "B", "C"}, Reason: "needs C"}
	for _, named := range []string{"A", "C", ""} {
		req := request("run-s-" + named)
		req.AgentID = named
		sr := sessionLoop(t, req, defs["C"], sess)
		if sr.Run.Agent == nil || sr.Run.Agent.ID != "C" || len(sr.Run.Handoffs) != 2 || sr.Run.Handoffs[1].Reason != "needs C" {
			t.Fatalf("named %q: agent %+v, chain %+v; want C continuing A→B→C", named, sr.Run.Agent, sr.Run.Handoffs)
		}
	}
	req := request("run-s2")
	req.AgentID = "A"
	sr := sessionLoop(t, req, defs["C"], sess)
	d := handOff(sr, "D", defs["D"], t0.Add(time.Second))
	run := only[PlanRequest](t, d).Run
	if run.Agent.ID != "D" || len(run.Handoffs) != 3 || run.Handoffs[2].Depth != 3 {
		t.Fatalf("handoff to D: agent %s chain %+v", run.Agent.ID, run.Handoffs)
	}
	// The run's end records the chain for the session's next run.
	end := Decide(sr.Run, Cancelled{Input: Joined{Group: sr.Group}, By: "u", At: t0.Add(2 * time.Second)})
	if c := end.Session; c == nil || c.AgentID != "C" || !slices.Equal(c.Chain, []string{"A", "B", "C"}) || c.Depth != 2 {
		t.Fatalf("session change %+v; want C with the chain A→B→C", end.Session)
	}

	next := &SessionState{Status: SessionActive, AgentID: "D", Chain: []string{"A", "B", "C", "D"}, Reason: "needs D"}
	req = request("run-s3")
	sr = sessionLoop(t, req, defs["D"], next)
	d = handOff(sr, "E", defs["E"], t0.Add(3*time.Second))
	if res := only[RunResult](t, d); res.TerminalCode != CodePermissionDenied {
		t.Fatalf("a fourth handoff across runs ended %s; want PERMISSION_DENIED", res.TerminalCode)
	}
	// A cycle back to an agent of an earlier run is refused too.
	back := chainAgent("C", "A")
	sr = sessionLoop(t, request("run-s4"), back, sess)
	if res := only[RunResult](t, handOff(sr, "A", defs["A"], t0)); res.TerminalCode != CodePermissionDenied {
		t.Fatalf("a handoff back to A across runs ended %s; want PERMISSION_DENIED", res.TerminalCode)
	}
}

// A handed-off session refuses a new run (REVIEW_REQUIRED), a completed
// one too (VALIDATION_FAIL), and a run naming another agent than the
// session's (VALIDATION_FAIL); each before any model call, with the code
// in detail, leaving the session untouched.
func TestDecideSessionRefusesRuns(t *testing.T) {
	cases := []struct {
		name, named string
		sess        SessionState
		code, want  string
	}{
		{"handed off", "A", SessionState{Status: SessionHandedOff, AgentID: "A"}, CodeReviewRequired, SessionRefusedHandedOff},
		{"handed off, no agent", "", SessionState{Status: SessionHandedOff}, CodeReviewRequired, SessionRefusedHandedOff},
		{"completed", "", SessionState{Status: SessionCompleted, AgentID: "A"}, CodeValidationFail, SessionRefusedCompleted},
		{"other agent", "X", SessionState{Status: SessionActive, AgentID: "C", Chain: []string{"A", "B", "C"}},
			CodeValidationFail, SessionRefusedAgent},
		{"middle of the chain", "B", SessionState{Status: SessionActive, AgentID: "C", Chain: []string{"A", "B", "C"}},
			CodeValidationFail, SessionRefusedAgent},
	}
	for _, c := range cases {
		req := request("run-r")
		req.AgentID = c.named
		d := Decide(State{}, Requested{Request: req, Agent: chainAgent("A"), Session: &c.sess, TaskTypes: taskTypes,
			Route: domain.Route{TaskType: "general", Pattern: PatternReact}, At: t0})
		res := only[RunResult](t, d)
		var detail struct {
			Code string `json:"code"`
		}
		if err := json.Unmarshal(res.Detail, &detail); err != nil {
			t.Fatalf("%s: detail %s: %v", c.name, res.Detail, err)
		}
		if res.TerminalCode != c.code || detail.Code != c.want || d.Session != nil || !slices.Contains(auditNames(d), "session.refused") {
			t.Errorf("%s: ended %s detail %s session %+v; want %s with %s and no session change", c.name, res.TerminalCode,
				res.Detail, d.Session, c.code, c.want)
		}
	}
	// A session without an agent takes the run's own; an active one the
	// run's own when it names none of the session's.
	for _, s := range []*SessionState{nil, {Status: SessionActive}} {
		if got, r := SessionAgent(RunRequest{AgentID: "X"}, s); got != "X" || r != nil {
			t.Errorf("SessionAgent in %+v = %q, %+v; want X", s, got, r)
		}
	}
}
