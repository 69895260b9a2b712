package pipeline

import (
	"fmt"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills/demo"
)

// recordedRun is one run's recorded messages and controls.
type recordedRun struct {
	id       string
	code     string
	seen     []event.Event
	controls runctl.ReplayControls
}

// gatesOf reads a run's gate records, its recorded controls.
func gatesOf(t *testing.T, env *handlerstest.Env, runID string) runctl.ReplayControls {
	t.Helper()
	recs, err := env.Gates.List(handlerstest.Ctx(t), handlerstest.Tenant, runID)
	if err != nil {
		t.Fatal(err)
	}
	c := runctl.ReplayControls{Gates: map[string]runctl.GateRecord{}}
	for _, r := range recs {
		c.Gates[r.Gate.ID] = r
	}
	return c
}

// TestReplay_ReDerivesTheVerdictsOf20RunsAndDetectsATamperedOne: 20 runs
// (plans that succeed, runs stopped by their budget, a run approved at a
// gate, one whose gate expired, one a replan revised) are recorded through
// the real roles; replaying each from its recorded messages, without a
// model or a skill, re-derives every message its decisions emitted with
// the same verdict. A transcript with one step's result changed diverges.
func TestReplay_ReDerivesTheVerdictsOf20RunsAndDetectsATamperedOne(t *testing.T) {
	wholeRun(t)
	var runs []recordedRun
	env := handlerstest.NewEnv(t)
	f := newFlow(t, env, env.Store)
	for i := range 14 {
		id := fmt.Sprintf("run-replay-%d", i)
		res, seen := f.drive(t, runStart(t, id, handlerstest.RankTask))
		runs = append(runs, recordedRun{id: id, code: res.TerminalCode, seen: seen})
	}
	budget := handlerstest.NewEnv(t)
	putPolicy(t, budget, `{"defaults":{"tool_calls":1}}`)
	fb := newFlow(t, budget, budget.Store)
	for i := range 3 {
		id := fmt.Sprintf("run-replay-budget-%d", i)
		res, seen := fb.drive(t, runStart(t, id, handlerstest.RankTask))
		runs = append(runs, recordedRun{id: id, code: res.TerminalCode, seen: seen})
	}
	genv, gf := destructiveOutlets(t)
	parked, _, seen := gf.parkedRun(t, "run-replay-gate", handlerstest.RankTask)
	p := gf.decideGate(t, genv, parked, orch.GateApproved, "lead", "")
	runs = append(runs, recordedRun{id: "run-replay-gate", code: p.finished[0].TerminalCode, seen: append(seen, p.seen...),
		controls: gatesOf(t, genv, "run-replay-gate")})
	res, seen := gf.drive(t, runStart(t, "run-replay-expired", handlerstest.RankTask))
	runs = append(runs, recordedRun{id: "run-replay-expired", code: res.TerminalCode, seen: seen,
		controls: gatesOf(t, genv, "run-replay-expired")})
	// The first skill call hangs past its timeout: the step fails and the
	// run replans.
	renv := handlerstest.NewEnvWith(t, demo.Config{HangFirst: map[string]int{demo.SkillOutletList: 1}})
	rf := newFlow(t, renv, renv.Store)
	rf.exec.SkillTimeout = 300 * time.Millisecond
	res, seen = rf.drive(t, runStart(t, "run-replay-replan", handlerstest.RankTask))
	runs = append(runs, recordedRun{id: "run-replay-replan", code: res.TerminalCode, seen: seen})

	codes := map[string]int{}
	for _, r := range runs {
		rep := runctl.ReplayRun(r.id, r.seen, r.controls)
		codes[rep.Code]++
		if rep.Decisions == 0 || len(rep.Divergences) > 0 || rep.Code != r.code {
			t.Errorf("%s: %d decisions, code %s (recorded %s), divergences %+v", r.id, rep.Decisions, rep.Code, r.code, rep.Divergences)
		}
	}
	if len(runs) != 20 || codes[orch.CodeSuccess] < 15 || codes[orch.CodeBudgetExhausted] != 3 || codes[orch.CodeConfirmRequired] != 1 {
		t.Fatalf("%d runs, codes %v", len(runs), codes)
	}

	// Tamper with run 0's transcript: its first step "failed" instead.
	r := runs[0]
	tampered := make([]event.Event, len(r.seen))
	done := false
	for i, ev := range r.seen {
		tampered[i] = ev
		if ev.Type() != events.TypeStepJoined || done {
			continue
		}
		var j orch.StepJoined
		if err := events.Decode(ev, &j); err != nil {
			t.Fatal(err)
		}
		j.Result.Outcome, j.Result.Reason = orch.OutcomeFailed, "tampered"
		forged, err := events.New(ev.ID(), ev.Type(), events.MetaOf(ev), j)
		if err != nil {
			t.Fatal(err)
		}
		forged.SetTime(ev.Time())
		tampered[i], done = forged, true
	}
	if !done {
		t.Fatal("run 0 has no step.joined to tamper with")
	}
	if rep := runctl.ReplayRun(r.id, tampered, r.controls); len(rep.Divergences) == 0 {
		t.Fatalf("the tampered transcript replayed without a divergence: %+v", rep)
	} else {
		t.Logf("tampered transcript: %d divergence(s), first %+v", len(rep.Divergences), rep.Divergences[0])
	}
}
