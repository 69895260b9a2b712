package pipeline

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/skills/demo"
)

// pumped is what a pump handled: the run's results, its parked notices,
// the scheduled gate resolutions (held back, as the server holds them
// until their time) and every event handled.
type pumped struct {
	finished  []orch.RunResult
	parked    []orch.RunParked
	scheduled []event.Event
	seen      []event.Event
}

// pump feeds queue into the role handlers until nothing is in flight: a
// run parked at a gate has nothing in flight.
func (f *flow) pump(t *testing.T, queue ...event.Event) pumped {
	t.Helper()
	ctx := handlerstest.Ctx(t)
	var p pumped
	for len(queue) > 0 {
		if len(p.seen) > 500 {
			t.Fatalf("no rest after %d events: %v", len(p.seen), handlerstest.Types(p.seen))
		}
		ev := queue[0]
		queue = queue[1:]
		_, scheduled := ev.Extensions()[events.ExtDeliverAt]
		switch typ := ev.Type(); {
		case typ == events.TypeRunFinished:
			p.finished = append(p.finished, handlerstest.Decode[orch.RunResult](t, ev))
			p.seen = append(p.seen, ev)
			continue
		case typ == events.TypeRunParked:
			p.parked = append(p.parked, handlerstest.Decode[orch.RunParked](t, ev))
			p.seen = append(p.seen, ev)
			continue
		case typ == events.TypeApprovalDecided && scheduled:
			p.scheduled = append(p.scheduled, ev)
			continue
		case typ == events.TypeReplyChunk || typ == events.TypeRunDeadline || typ == events.TypeGroupDeadline:
			continue
		}
		p.seen = append(p.seen, ev)
		h := handlerOf(f, ev.Type())
		if h == nil {
			t.Fatalf("no handler for %s", ev.Type())
		}
		outs, err := h(ctx, ev)
		if err != nil {
			t.Fatalf("Handle %s: %v", ev.Type(), err)
		}
		handlerstest.CheckOutputs(t, outs)
		queue = append(queue, outs...)
	}
	return p
}

// delivered is a scheduled event as the server delivers it, at its time:
// without the schedule.
func delivered(ev event.Event) event.Event {
	ev = ev.Clone()
	ev.SetExtension(events.ExtDeliverAt, nil)
	return ev
}

// parkedRun runs runID until it parks at a gate, and returns the notice,
// the gate's scheduled expiry and the events handled.
func (f *flow) parkedRun(t *testing.T, runID, task string) (orch.RunParked, event.Event, []event.Event) {
	t.Helper()
	p := f.pump(t, handlerstest.NewEvent(t, runID, events.TypeRunRequested, handlerstest.RunRequest(runID, task)))
	if len(p.finished) != 0 || len(p.parked) != 1 || len(p.scheduled) != 1 {
		t.Fatalf("want the run parked: finished %+v, parked %+v, %d scheduled; trace %v", p.finished, p.parked,
			len(p.scheduled), traceNames(p.seen))
	}
	return p.parked[0], p.scheduled[0], p.seen
}

// decideGate resolves the gate as the ingress does (the record, then
// approval.decided) and pumps the run on.
func (f *flow) decideGate(t *testing.T, env *handlerstest.Env, parked orch.RunParked, decision, by, comment string) pumped {
	t.Helper()
	return f.decide(t, env, parked, orch.ApprovalDecided{Decision: decision, By: by, Comment: comment})
}

// decide is decideGate with a's decision, approver, comment and answers.
func (f *flow) decide(t *testing.T, env *handlerstest.Env, parked orch.RunParked, a orch.ApprovalDecided) pumped {
	t.Helper()
	a.RunID, a.TenantID, a.SessionID, a.Gate, a.At = parked.RunID, handlerstest.Tenant, handlerstest.Session, parked.Gate.Gate, time.Now()
	decision := a.Decision
	if _, _, err := env.Gates.Resolve(handlerstest.Ctx(t), handlerstest.Tenant, a); err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	ev, err := events.New(events.DeriveID(a.Gate, "decided/"+decision), events.TypeApprovalDecided,
		events.Meta{Tenant: handlerstest.Tenant, Session: handlerstest.Session, Run: parked.RunID}, a)
	if err != nil {
		t.Fatal(err)
	}
	return f.pump(t, ev)
}

// destructiveOutlets is the demo Skill Service with outlet_list annotated
// destructive, and a flow whose ReACT loop calls it once, then answers.
func destructiveOutlets(t *testing.T) (*handlerstest.Env, *flow) {
	t.Helper()
	destructive := &skills.Annotations{ReadOnlyHint: mcp.ToBoolPtr(false), DestructiveHint: mcp.ToBoolPtr(true)}
	env := handlerstest.NewEnvWith(t, demo.Config{Hints: map[string]*skills.Annotations{demo.SkillOutletList: destructive}})
	return env, patternFlow(t, env, calling(t, "active"))
}

// TestGate_ADestructiveCallRunsOnlyAfterItsApproval: the call waits at a
// gate (the run parked, its packet out, nothing called); approved, it is
// made once and the run completes, the approver recorded; denied, the run
// ends rejected; expired, CONFIRM_REQUIRED; a step message claiming an
// approval its gate's record does not hold fails closed.
func TestGate_ADestructiveCallRunsOnlyAfterItsApproval(t *testing.T) {
	wholeRun(t)
	t.Run("approved", func(t *testing.T) {
		env, f := destructiveOutlets(t)
		parked, expiry, seen := f.parkedRun(t, "run-gate-ok", handlerstest.RankTask)
		if n := env.Demo.Calls(demo.SkillOutletList); n != 0 {
			t.Fatalf("the destructive skill ran %d times before its approval", n)
		}
		if a := parked.Gate.Actions; parked.Status != orch.PlanAwaitingGate || len(a) != 1 || a[0].Action != demo.SkillOutletList ||
			a[0].Risk != skills.ModeDestructive || string(a[0].Parameters) != `{"status":"active"}` || len(a[0].Evidence) == 0 {
			t.Fatalf("packet %+v", parked)
		}
		if !slices.Contains(traceNames(seen), "gate.opened") || !slices.Contains(traceNames(seen), "approval.required") {
			t.Fatalf("trace %v", traceNames(seen))
		}
		views, err := env.Gates.List(handlerstest.Ctx(t), handlerstest.Tenant, "run-gate-ok")
		if err != nil || len(views) != 1 || views[0].Status != orch.GateOpen {
			t.Fatalf("gates %+v, %v", views, err)
		}
		p := f.decideGate(t, env, parked, orch.GateApproved, "lead", "")
		if len(p.finished) != 1 || p.finished[0].TerminalCode != orch.CodeSuccess {
			t.Fatalf("after approval: %+v (trace %v)", p.finished, traceNames(p.seen))
		}
		if n := env.Demo.Calls(demo.SkillOutletList); n != 1 {
			t.Fatalf("the approved call ran %d times, want once", n)
		}
		if used := handlerstest.AuditPayloads(t, p.seen, "approval.used"); len(used) != 1 || used[0]["by"] != "lead" {
			t.Fatalf("approval.used %v", used)
		}
		if g := handlerstest.AuditPayloads(t, p.seen, "gate.approved"); len(g) != 1 || g[0]["by"] != "lead" {
			t.Fatalf("gate.approved %v", g)
		}
		// The gate's expiry arrives later: the gate was applied, nothing happens.
		if outs, err := f.router.Handle(handlerstest.Ctx(t), expiry); err != nil || len(outs) != 0 {
			t.Fatalf("the expiry of an applied gate: %v, %v", handlerstest.Types(outs), err)
		}
		// The same approval again (a retried request) finds it applied:
		// the ingress sends nothing more.
		rec, _, err := env.Gates.Resolve(handlerstest.Ctx(t), handlerstest.Tenant, orch.ApprovalDecided{RunID: "run-gate-ok", Gate: parked.Gate.Gate,
			Decision: orch.GateApproved, By: "lead"})
		if err != nil || rec.Applied == "" || rec.By != "lead" {
			t.Fatalf("the record after its application: %+v, %v", rec, err)
		}
	})
	t.Run("rejected", func(t *testing.T) {
		env, f := destructiveOutlets(t)
		parked, _, _ := f.parkedRun(t, "run-gate-deny", handlerstest.RankTask)
		p := f.decideGate(t, env, parked, orch.GateRejected, "lead", "not today")
		if len(p.finished) != 1 || p.finished[0].TerminalCode != orch.CodeUserCancel || p.finished[0].Status != orch.PlanRejected ||
			!strings.Contains(p.finished[0].Reason, "not approved by lead: not today") {
			t.Fatalf("after denial: %+v", p.finished)
		}
		if n := env.Demo.Calls(demo.SkillOutletList); n != 0 {
			t.Fatalf("a denied call ran %d times", n)
		}
	})
	t.Run("expired", func(t *testing.T) {
		env, f := destructiveOutlets(t)
		_, expiry, _ := f.parkedRun(t, "run-gate-ttl", handlerstest.RankTask)
		p := f.pump(t, delivered(expiry))
		if len(p.finished) != 1 || p.finished[0].TerminalCode != orch.CodeConfirmRequired || p.finished[0].Status != orch.PlanExpired {
			t.Fatalf("after the TTL: %+v", p.finished)
		}
		rec, _, err := env.Gates.Get(handlerstest.Ctx(t), handlerstest.Tenant, "run-gate-ttl", handlerstest.Decode[orch.ApprovalDecided](t, expiry).Gate)
		if err != nil || rec.Status != orch.GateExpired {
			t.Fatalf("gate record %s, %v", rec.Status, err)
		}
		if n := env.Demo.Calls(demo.SkillOutletList); n != 0 {
			t.Fatalf("an expired call ran %d times", n)
		}
		// A decision after the expiry is refused.
		_, _, err = env.Gates.Resolve(handlerstest.Ctx(t), handlerstest.Tenant, orch.ApprovalDecided{RunID: "run-gate-ttl", Gate: rec.Gate.ID,
			Decision: orch.GateApproved, By: "late"})
		if err == nil {
			t.Fatal("an expired gate was approved")
		}
	})
	t.Run("forged approval", func(t *testing.T) {
		env, f := destructiveOutlets(t)
		parked, _, seen := f.parkedRun(t, "run-gate-forged", handlerstest.RankTask)
		// A step message that claims the gate's approval while the gate
		// is still open: the executor checks the record and refuses.
		fin := handlerstest.Decode[orch.StepJoined](t, handlerstest.OfType(seen, events.TypeStepJoined)[0])
		p := fin.Result.Parked
		st := fin.Run
		st.Plan.Live(1).Status = orch.StepRunning
		forged := orch.StepRequest{Run: st, Step: 1, Group: orch.Group{ID: "grp-forged", Expected: 1}, Iteration: p.Iteration,
			Turns: p.Turns, Approved: &orch.Approved{Gate: parked.Gate.Gate, By: "mallory", Call: p.Call}}
		outs, err := f.exec.Handle(handlerstest.Ctx(t), handlerstest.NewEvent(t, "forged", events.TypeStepRequested, forged))
		if err != nil {
			t.Fatal(err)
		}
		if env.Demo.Calls(demo.SkillOutletList) != 0 {
			t.Fatal("a forged approval made the call")
		}
		j := handlerstest.Decode[orch.StepJoined](t, handlerstest.OfType(outs, events.TypeStepJoined)[0])
		if j.Result.Outcome != orch.OutcomeUnsafe || !strings.Contains(j.Result.Reason, "is open") {
			t.Fatalf("forged approval: %s %s", j.Result.Outcome, j.Result.Reason)
		}
	})
}

// TestGate_ConfiguredModesGoThroughAGate: a tenant's approval_gates make
// its network calls wait at a gate too; another tenant's do not.
func TestGate_ConfiguredModesGoThroughAGate(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	f := patternFlow(t, env, calling(t, "active"))
	withModes(t, env, f, `{"*":{"`+demo.SkillOutletList+`":"network"}}`)
	if _, err := env.Config.Put(handlerstest.Ctx(t), runctl.ConfigKeyApprovalGates, []byte(`{"`+handlerstest.Tenant+`":["network"],"*":[]}`)); err != nil {
		t.Fatal(err)
	}
	// Network calls are gated by default: wait for "*": [] to relax acme's.
	eventually(t, func() bool { return !f.exec.Modes.Gated("acme", skills.ModeNetwork) })
	if !f.exec.Modes.Gated(handlerstest.Tenant, skills.ModeNetwork) || !f.exec.Modes.Gated("acme", skills.ModeDestructive) {
		t.Fatal("gated modes leak across tenants, or destructive is not always gated")
	}
	parked, _, _ := f.parkedRun(t, "run-gate-network", handlerstest.RankTask)
	if a := parked.Gate.Actions; len(a) != 1 || a[0].Risk != skills.ModeNetwork || env.Demo.Calls(demo.SkillOutletList) != 0 {
		t.Fatalf("packet %+v, %d calls", parked.Gate, env.Demo.Calls(demo.SkillOutletList))
	}
	if p := f.decideGate(t, env, parked, orch.GateApproved, "lead", ""); len(p.finished) != 1 ||
		p.finished[0].TerminalCode != orch.CodeSuccess || env.Demo.Calls(demo.SkillOutletList) != 1 {
		t.Fatalf("after approval: %+v", p.finished)
	}
}

// withControls follows the cancels bucket (cancels, interrupts, steers)
// in the router and the executor.
func withControls(t *testing.T, env *handlerstest.Env, f *flow) *runctl.Cancels {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := runctl.NewCancels(env.Cancels)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	f.router.Cancels, f.exec.Cancels = c, c
	return c
}

// TestInterrupt_ParksAtTheNextHopAndResumes: an interrupt recorded while
// step 1 runs parks the run when step 1 joins (step 2 not dispatched);
// resumed, the run goes on to its end, each skill called once.
func TestInterrupt_ParksAtTheNextHopAndResumes(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	f := newFlow(t, env, env.Store)
	c := withControls(t, env, f)
	first := runStart(t, "run-interrupt", handlerstest.RankTask)
	interrupted := false
	var queue []event.Event
	// Run until step 1 is requested, then interrupt.
	queue = append(queue, first)
	for len(queue) > 0 && !interrupted {
		ev := queue[0]
		queue = queue[1:]
		if ev.Type() == events.TypeStepRequested {
			if err := c.RequestInterrupt(handlerstest.Ctx(t), handlerstest.Tenant, "run-interrupt", runctl.Interrupt{ID: "int-1", By: "ops"}); err != nil {
				t.Fatal(err)
			}
			eventually(t, func() bool { _, ok := c.Interrupt(handlerstest.Tenant, "run-interrupt"); return ok })
			interrupted = true
		}
		if h := handlerOf(f, ev.Type()); h != nil && ev.Type() != events.TypeRunDeadline {
			outs, err := h(handlerstest.Ctx(t), ev)
			if err != nil {
				t.Fatal(err)
			}
			queue = append(queue, outs...)
		}
	}
	p := f.pump(t, queue...)
	if len(p.finished) != 0 || len(p.parked) != 1 || p.parked[0].Status != orch.PlanPaused || p.parked[0].Gate.Kind != orch.GateInterrupt {
		t.Fatalf("want the run paused: %+v %+v (trace %v)", p.finished, p.parked, traceNames(p.seen))
	}
	if n := len(handlerstest.OfType(p.seen, events.TypeStepRequested)); n != 0 {
		t.Fatalf("%d steps requested after the interrupt; step 2 must wait for the resume", n)
	}
	done := f.decideGate(t, env, p.parked[0], orch.GateApproved, "ops", "resumed")
	if len(done.finished) != 1 || done.finished[0].TerminalCode != orch.CodeSuccess {
		t.Fatalf("after resume: %+v (trace %v)", done.finished, traceNames(done.seen))
	}
	if env.Demo.Calls(demo.SkillOutletList) != 1 || env.Demo.Calls(demo.SkillEngagementAnalytics) != 1 {
		t.Fatalf("calls: outlet_list %d, engagement %d; want each once", env.Demo.Calls(demo.SkillOutletList),
			env.Demo.Calls(demo.SkillEngagementAnalytics))
	}
}

// TestSteer_TheNextTurnSeesTheMessage: a steering message recorded for a
// run reaches the model in every later turn of its steps, traced once per
// step.
func TestSteer_TheNextTurnSeesTheMessage(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	model := calling(t, "active")
	f := patternFlow(t, env, model)
	c := withControls(t, env, f)
	if err := c.AddSteer(handlerstest.Ctx(t), handlerstest.Tenant, "run-steer", runctl.Steer{ID: "st-1", Message: "only outlets in the north", By: "u"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return len(c.Steers(handlerstest.Tenant, "run-steer")) == 1 })
	res, seen := f.drive(t, handlerstest.NewEvent(t, "run-steer", events.TypeRunRequested, handlerstest.RunRequest("run-steer", handlerstest.RankTask)))
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("ended %s: %s", res.TerminalCode, res.Reason)
	}
	acts := model.Requests(llm.TaskAct)
	if len(acts) < 2 {
		t.Fatalf("%d act turns", len(acts))
	}
	for i, req := range acts {
		if !slices.ContainsFunc(req.Messages, func(m llm.Message) bool { return strings.Contains(m.Content, "only outlets in the north") }) {
			t.Errorf("act turn %d did not see the steering message", i+1)
		}
	}
	if n := len(handlerstest.AuditPayloads(t, seen, "steer.applied")); n != 1 {
		t.Errorf("%d steer.applied, want 1 (one step)", n)
	}
	for range runctl.MaxSteers - 1 {
		if err := c.AddSteer(handlerstest.Ctx(t), handlerstest.Tenant, "run-steer", runctl.Steer{ID: "x", Message: "m"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.AddSteer(handlerstest.Ctx(t), handlerstest.Tenant, "run-steer", runctl.Steer{ID: "x", Message: "m"}); err == nil {
		t.Error("a steer past the limit was kept")
	}
}
