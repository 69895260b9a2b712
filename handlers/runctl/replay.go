package runctl

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/orch"
)

// Replay (seed 004) re-derives a run's decisions from its recorded
// messages: every input the router took (a proposal, a joined group, a
// gate's resolution) is folded through orch.Decide with the state it
// carried and the time it was recorded at, and each message the decision
// emits must be in the record, with the same verdict (the step it runs,
// its group and every step's status; a replan's failure; the run's
// terminal code and status). No model and no tool is called: a synthesis
// is answered with the recorded answer. The routing decision itself is not
// replayed (the model's choice and the configuration it chose from are
// recorded in the state the run carries from then on), nor is routing
// again a run whose question of intent was answered.

// ReplayControls are a run's recorded controls, which the router read
// from its buckets rather than from a message: its cancel, its interrupt
// and its gates.
type ReplayControls struct {
	Cancel    *Cancel
	Interrupt *Interrupt
	Gates     map[string]GateRecord // by gate id
}

// ReplayReport is what a replay of one run found.
type ReplayReport struct {
	RunID string `json:"run_id"`
	// Decisions counts the recorded inputs re-decided; Verdicts are the
	// re-derived verdicts, in order.
	Decisions   int          `json:"decisions"`
	Verdicts    []string     `json:"verdicts"`
	Code        string       `json:"terminal_code,omitempty"`
	Divergences []Divergence `json:"divergences,omitempty"`
}

// Divergence is a re-derived message that the record does not hold as
// derived: missing, or with another verdict.
type Divergence struct {
	Input    string `json:"input_id"`
	Type     string `json:"input_type"`
	Message  string `json:"message_id"`
	Recorded string `json:"recorded,omitempty"`
	Replayed string `json:"replayed"`
}

// routerInputs are the recorded types the router decides on.
var routerInputs = []string{events.TypePlanProposed, events.TypeGroupJoined, events.TypeStepJoined, events.TypeApprovalDecided}

// ReplayRun replays one run from its recorded orchestration messages (any
// order; audit events are ignored).
func ReplayRun(runID string, recorded []event.Event, c ReplayControls) ReplayReport {
	rep := ReplayReport{RunID: runID}
	byID := map[string]event.Event{}
	for _, ev := range recorded {
		if !strings.HasPrefix(ev.Type(), events.TypeAuditPrefix) {
			byID[ev.ID()] = ev
		}
	}
	ordered := slices.SortedFunc(maps.Values(byID), func(a, b event.Event) int {
		if c := a.Time().Compare(b.Time()); c != 0 {
			return c
		}
		return strings.Compare(a.ID(), b.ID())
	})
	for _, ev := range ordered {
		if !slices.Contains(routerInputs, ev.Type()) || ev.Extensions()[events.ExtDeliverAt] != nil {
			continue
		}
		state, in, ok := replayInput(ev, c)
		if !ok {
			continue
		}
		in = replayHandoff(ev, state, in, byID)
		rep.Decisions++
		var best []Divergence
		for i, cand := range controlled(state, in, ev, c) {
			verdicts, divs := replayDecision(ev, state, cand, byID)
			if i == 0 || len(divs) < len(best) {
				best = divs
			}
			if len(divs) == 0 {
				rep.Verdicts = append(rep.Verdicts, verdicts...)
				best = nil
				break
			}
		}
		rep.Divergences = append(rep.Divergences, best...)
	}
	if fin, ok := byID[events.DeriveID(runID, "run.finished")]; ok {
		var res orch.RunResult
		if events.Decode(fin, &res) == nil {
			rep.Code = res.TerminalCode
		}
	}
	return rep
}

// replayInput is the decider's state and input of a recorded router
// input, as the router built them.
func replayInput(ev event.Event, c ReplayControls) (orch.State, orch.Input, bool) {
	at := ev.Time().UTC()
	switch ev.Type() {
	case events.TypePlanProposed:
		var p orch.PlanProposal
		if events.Decode(ev, &p) != nil {
			return orch.State{}, nil, false
		}
		return p.Run, orch.Planned{Proposal: p, At: at}, true
	case events.TypeGroupJoined:
		var j orch.GroupJoined
		if events.Decode(ev, &j) != nil {
			return orch.State{}, nil, false
		}
		return j.Run, orch.Joined{Group: j.Group, Results: j.Results, Partial: j.Partial, At: at}, true
	case events.TypeStepJoined:
		var j orch.StepJoined
		if events.Decode(ev, &j) != nil {
			return orch.State{}, nil, false
		}
		return j.Run, orch.Joined{Group: j.Group, Results: []orch.StepResult{j.Result}, At: at}, true
	case events.TypeApprovalDecided:
		var a orch.ApprovalDecided
		if events.Decode(ev, &a) != nil {
			return orch.State{}, nil, false
		}
		rec, ok := c.Gates[a.Gate]
		if !ok || rec.Applied != ev.ID() {
			return orch.State{}, nil, false // not the input that took the resolution to the run
		}
		if g := rec.Gate; g.Kind == orch.GateClarify && g.Replan == nil && rec.Status == orch.GateApproved {
			return orch.State{}, nil, false // an answered question of intent routes the run again: not replayed
		}
		return rec.State, rec.Resolved(), true
	}
	return orch.State{}, nil, false
}

// replayHandoff gives a joined input whose member handed off to an agent
// the target the router loaded: the definition the run took on, as the
// recorded plan request of the handoff carries it. Without one, the
// router could not have loaded it (the decision refused the handoff).
func replayHandoff(ev event.Event, state orch.State, in orch.Input, byID map[string]event.Event) orch.Input {
	j, ok := in.(orch.Joined)
	if !ok {
		return in
	}
	i := slices.IndexFunc(j.Results, func(r orch.StepResult) bool {
		return r.Outcome == orch.OutcomeHandoff && r.Handoff != nil && r.Handoff.To == orch.HandoffToAgent
	})
	if i < 0 {
		return in
	}
	target := j.Results[i].Handoff.TargetAgentID
	j.TargetError = fmt.Sprintf("agent %q was not loaded", target)
	if rec, ok := byID[events.DeriveID(ev.ID(), fmt.Sprintf("handoff/%d", len(state.Handoffs)+1))]; ok {
		var pr orch.PlanRequest
		if events.Decode(rec, &pr) == nil && pr.Run.Agent != nil && pr.Run.Agent.ID == target {
			j.Target, j.TargetError = pr.Run.Agent, ""
		}
	}
	return j
}

// controlled are the inputs the router may have made of in: as it came,
// cancelled, or interrupted, by the run's recorded controls.
func controlled(state orch.State, in orch.Input, ev event.Event, c ReplayControls) []orch.Input {
	out := []orch.Input{in}
	at := ev.Time().UTC()
	if r, ok := in.(orch.GateResolved); ok {
		at = r.At
	}
	if k := c.Cancel; k != nil {
		out = append(out, orch.Cancelled{Input: in, By: k.By, RequestedAt: k.At, Timeout: k.Reason == CancelTimeout, At: at})
	}
	if i := c.Interrupt; i != nil && i.ID != state.Interrupt && ev.Type() != events.TypeApprovalDecided {
		out = append(out, orch.Interrupted{Input: in, ID: i.ID, By: i.By, At: at})
	}
	return out
}

// replayDecision decides in on state and checks each emitted message
// against the record.
func replayDecision(ev event.Event, state orch.State, in orch.Input, byID map[string]event.Event) ([]string, []Divergence) {
	d := orch.Decide(state, in)
	if d.Review == nil {
		return checkDecision(ev, replaySynthesis(d, byID), byID)
	}
	// The review's answer is in the record only through what it led to
	// (a fan-out again, or the answer): each is tried, the one that
	// re-derives the record is taken.
	var verdicts []string
	var divs []Divergence
	for i, sufficient := range []bool{true, false} {
		rv := orch.Reviewed{Sufficient: sufficient, At: ev.Time().UTC()}
		if !sufficient {
			rv.Gaps = "as recorded"
		}
		v, dv := checkDecision(ev, replaySynthesis(orch.Continue(d, rv), byID), byID)
		if i == 0 || len(dv) < len(divs) {
			verdicts, divs = v, dv
		}
		if len(dv) == 0 {
			break
		}
	}
	return verdicts, divs
}

// checkDecision checks each message d emits against the record.
func checkDecision(ev event.Event, d orch.Decision, byID map[string]event.Event) ([]string, []Divergence) {
	var verdicts []string
	var divs []Divergence
	for _, e := range d.Emits {
		if !e.At.IsZero() {
			continue // scheduled: stored on its schedule subject until its time
		}
		id := events.DeriveID(ev.ID(), e.Key)
		if e.RunScope != "" {
			id = events.DeriveID(e.RunScope, e.Key)
		}
		got := verdictOf(e.Data)
		verdicts = append(verdicts, got)
		rec, ok := byID[id]
		if !ok {
			divs = append(divs, Divergence{Input: ev.ID(), Type: ev.Type(), Message: id, Replayed: got})
			continue
		}
		if want := recordedVerdict(rec); want != got {
			divs = append(divs, Divergence{Input: ev.ID(), Type: ev.Type(), Message: id, Recorded: want, Replayed: got})
		}
	}
	return verdicts, divs
}

// replaySynthesis answers a decision's synthesis from the recorded
// result: its answer, or the failure it recorded.
func replaySynthesis(d orch.Decision, byID map[string]event.Event) orch.Decision {
	if d.Synthesise == nil {
		return d
	}
	syn := orch.Synthesised{At: d.State.Plan.CompletedAt}
	if fin, ok := byID[events.DeriveID(d.State.Request.RunID, "run.finished")]; ok {
		var res orch.RunResult
		if events.Decode(fin, &res) == nil {
			syn.Answer, syn.At = res.Response, fin.Time().UTC()
			if res.TerminalCode != orch.CodeSuccess && res.TerminalCode != orch.CodePartialSuccess {
				syn.Failure = &orch.Failure{Code: res.TerminalCode, Reason: strings.TrimPrefix(res.Reason, "synthesis failed: ")}
			}
		}
	}
	return orch.Continue(d, syn)
}

// recordedVerdict is the verdict a recorded message carries.
func recordedVerdict(ev event.Event) string {
	switch ev.Type() {
	case events.TypeStepRequested:
		return decodedVerdict[orch.StepRequest](ev)
	case events.TypePlanRequested:
		return decodedVerdict[orch.PlanRequest](ev)
	case events.TypeRunFinished:
		return decodedVerdict[orch.RunResult](ev)
	case events.TypeRunParked:
		return decodedVerdict[orch.RunParked](ev)
	}
	return ev.Type()
}

// decodedVerdict is the verdict of ev's data, decoded as a T.
func decodedVerdict[T any](ev event.Event) string {
	var v T
	if err := events.Decode(ev, &v); err != nil {
		return "undecodable " + ev.Type()
	}
	return verdictOf(v)
}

// verdictOf is what a decision decided in one message: what it runs or
// how it ends, and every step's status (and a lane's sub-agent).
func verdictOf(data any) string {
	switch v := data.(type) {
	case orch.StepRequest:
		return fmt.Sprintf("step %d in %s (%d): %s", v.Step, v.Group.ID, v.Group.Expected, planVerdict(v.Run))
	case orch.PlanRequest:
		f := "none"
		if v.Failure != nil {
			f = fmt.Sprintf("step %d %s", v.Failure.Step, v.Failure.Outcome)
		}
		return fmt.Sprintf("plan (failure %s, replans %d): %s", f, v.Run.Plan.ReplanCount, planVerdict(v.Run))
	case orch.RunResult:
		var st []string
		for _, s := range v.Steps {
			st = append(st, fmt.Sprintf("%d:%s", s.Index, s.Status))
		}
		verdict := ""
		if r := v.Decision; r != nil {
			var scores []string
			for _, sc := range r.StepScores {
				scores = append(scores, fmt.Sprintf("%d:%g/%g", sc.Step, sc.Scores["policy"], sc.Scores["utility"]))
			}
			verdict = fmt.Sprintf("; critic %s [%s] guard trips %d replans %d", r.Verdict, strings.Join(scores, " "),
				r.LoopGuardTrips, r.ReplanAttempts)
		}
		return fmt.Sprintf("finished %s %s: %s%s", v.TerminalCode, v.Status, strings.Join(st, " "), verdict)
	case orch.RunParked:
		b, _ := json.Marshal(v.Gate.Actions)
		return fmt.Sprintf("parked at %s (%s): %s", v.Gate.Gate, v.Status, b)
	}
	return fmt.Sprintf("%T", data)
}

func planVerdict(s orch.State) string {
	var st []string
	for _, step := range s.Plan.Steps {
		v := fmt.Sprintf("%d:%s", step.Index, step.Status)
		if a := step.LaneAgent(); a != "" {
			v += "@" + a // the sub-agent a supervisor agent's lane runs as
		}
		st = append(st, v)
	}
	return s.Plan.Status + " " + strings.Join(st, " ")
}
