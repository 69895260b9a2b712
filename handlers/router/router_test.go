package router_test

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/router"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/llmtest"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

const (
	step2Output = `{"results":[{"outlet_id":"out-002","name":"Central Station","score":40,"rank":2},` +
		`{"outlet_id":"out-001","name":"Harbour Front","score":88.1,"rank":1}]}`
	wantAnswer = "Result for \"" + handlerstest.RankTask + "\":\n" +
		"1. Harbour Front (out-001) — score 88.1\n" +
		"2. Central Station (out-002) — score 40"
)

func TestRouterStart(t *testing.T) {
	env := handlerstest.NewEnv(t)
	r := handlerstest.NewRouter(t, env)
	ev := handlerstest.NewEvent(t, "run-start", events.TypeRunRequested, handlerstest.RunRequest("run-start", handlerstest.RankTask))
	outs, err := r.Handle(handlerstest.Ctx(t), ev)
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	handlerstest.CheckOutputs(t, outs)
	pr := handlerstest.Only(t, outs, events.TypePlanRequested)
	names := handlerstest.AuditNames(outs)
	deadline := handlerstest.Only(t, outs, events.TypeRunDeadline)
	if len(names)+2 != len(outs) {
		t.Errorf("outputs %v: want one plan.requested, the run's deadline and audit events only", handlerstest.Types(outs))
	}
	if at := events.Ext(deadline, events.ExtDeliverAt); at == "" {
		t.Errorf("the run's deadline is not a scheduled message")
	}
	for _, want := range []string{"user_message.received", "routing.decided"} {
		if !slices.Contains(names, want) {
			t.Errorf("audit events %v lack %s", names, want)
		}
	}
	req := handlerstest.Decode[orch.PlanRequest](t, pr)
	run := req.Run
	if !reflect.DeepEqual(run.Request, handlerstest.RunRequest("run-start", handlerstest.RankTask)) {
		t.Errorf("run request = %+v", run.Request)
	}
	if req.Failure != nil {
		t.Errorf("a first plan request carries failure %+v", req.Failure)
	}
	if run.TaskType != "general" || run.Pattern != router.PatternPlanThenExecute {
		t.Errorf("route = %s/%s, want general/%s", run.TaskType, run.Pattern, router.PatternPlanThenExecute)
	}
	if run.Seq != 1 || run.Plan.Status != orch.PlanPlanning || !strings.HasPrefix(run.Plan.PlanID, "plan-") {
		t.Errorf("run seq %d plan %s status %s", run.Seq, run.Plan.PlanID, run.Plan.Status)
	}
	_, routing := handlerstest.AuditOf(t, outs, "routing.decided")
	if routing["task_type"] != "general" || routing["pattern"] != router.PatternPlanThenExecute {
		t.Errorf("routing.decided payload = %v", routing)
	}
	p := handlerstest.AssertProjection(t, env, run.Plan.PlanID, store.PlanStatusPlanning, 1)
	if p.TenantID != handlerstest.Tenant || p.SessionID != handlerstest.Session || p.UserID != handlerstest.User {
		t.Errorf("projection identity = %s/%s/%s", p.TenantID, p.SessionID, p.UserID)
	}
	// The plan id is derived from the run id: a redelivery names the same plan.
	outs2, err := r.Handle(handlerstest.Ctx(t), ev)
	if err != nil {
		t.Fatalf("Handle (redelivery): %v", err)
	}
	if !slices.Equal(handlerstest.IDs(outs), handlerstest.IDs(outs2)) {
		t.Errorf("redelivery ids %v, want %v", handlerstest.IDs(outs2), handlerstest.IDs(outs))
	}
	if got := handlerstest.Decode[orch.PlanRequest](t, handlerstest.Only(t, outs2, events.TypePlanRequested)).Run.Plan.PlanID; got != run.Plan.PlanID {
		t.Errorf("redelivery plan id %s, want %s", got, run.Plan.PlanID)
	}
	handlerstest.AssertProjection(t, env, run.Plan.PlanID, store.PlanStatusPlanning, 1)
}

// badRequest is a valid request changed by f.
func badRequest(f func(*orch.RunRequest)) orch.RunRequest {
	req := handlerstest.RunRequest("run-bad", handlerstest.RankTask)
	f(&req)
	return req
}

func TestRouterRejects(t *testing.T) {
	env := handlerstest.NewEnv(t)
	r := handlerstest.NewRouter(t, env)
	cases := []struct {
		name    string
		typ     string
		data    any
		wantErr error
	}{
		{"tenant with a dot", events.TypeRunRequested, badRequest(func(r *orch.RunRequest) { r.TenantID = "a.b" }), events.ErrInvalidData},
		{"no run id", events.TypeRunRequested, badRequest(func(r *orch.RunRequest) { r.RunID = "" }), events.ErrInvalidData},
		{"data is not a request", events.TypeRunRequested, "just a string", events.ErrDecode},
		{"type the router does not handle", events.TypeStepFinished, orch.StepFinished{}, events.ErrUnknownType},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			outs, err := r.Handle(handlerstest.Ctx(t), handlerstest.NewEvent(t, "ev-"+tc.name, tc.typ, tc.data))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if !events.IsPermanent(err) {
				t.Errorf("err %v is not permanent: it would be redelivered forever", err)
			}
			if len(outs) != 0 {
				t.Errorf("got outputs %v on error", handlerstest.Types(outs))
			}
		})
	}
}

// A request with a run id and a tenant but otherwise invalid ends its run
// VALIDATION_FAIL at once, without a model call and without a dead letter.
func TestRouterEndsInvalidRequests(t *testing.T) {
	env := handlerstest.NewEnv(t)
	r := handlerstest.NewRouter(t, env)
	cases := []struct {
		name string
		req  orch.RunRequest
	}{
		{"empty message", badRequest(func(r *orch.RunRequest) { r.Message = "" })},
		{"blank message", badRequest(func(r *orch.RunRequest) { r.Message = " \n\t" })},
		{"message over 32 KiB", badRequest(func(r *orch.RunRequest) { r.Message = strings.Repeat("x", 32<<10+1) })},
		{"session with a space", badRequest(func(r *orch.RunRequest) { r.SessionID = "a b" })},
		{"no user", badRequest(func(r *orch.RunRequest) { r.UserID = "" })},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			outs, err := r.Handle(handlerstest.Ctx(t), handlerstest.NewEvent(t, "ev-"+tc.name, events.TypeRunRequested, tc.req))
			if err != nil {
				t.Fatalf("err = %v, want the run ended", err)
			}
			res := handlerstest.Decode[orch.RunResult](t, handlerstest.Only(t, outs, events.TypeRunFinished))
			if res.TerminalCode != orch.CodeValidationFail || !strings.Contains(res.Reason, "invalid run request") {
				t.Errorf("result %s %q, want VALIDATION_FAIL naming the invalid request", res.TerminalCode, res.Reason)
			}
			want := []string{"user_message.received", handlers.AuditPlanPersisted, "run.finished", handlers.AuditPlanProjected}
			if got := handlerstest.AuditNames(outs); len(outs) != 5 || !slices.Equal(got, want) {
				t.Errorf("outputs %v, want the %v audits and the result only", handlerstest.Types(outs), want)
			}
			handlerstest.AssertProjection(t, env, res.PlanID, store.PlanStatusFailed, 2)
		})
	}
}

func TestRouterRunLifecycleSuccess(t *testing.T) {
	env := handlerstest.NewEnv(t)
	r := handlerstest.NewRouter(t, env)
	prEv, pr := handlerstest.StartRun(t, r, "run-ok")
	planID := pr.Run.Plan.PlanID

	// plan.proposed: only step 1 is ready.
	outs := handlerstest.Propose(t, r, prEv, pr.Run, handlerstest.TwoSteps())
	if got := handlerstest.AuditNames(outs); !slices.Contains(got, "plan.received") || !slices.Contains(got, "step_1.started") {
		t.Errorf("audit events %v lack plan.received / step_1.started", got)
	}
	s1Ev := handlerstest.Only(t, outs, events.TypeStepRequested)
	s1 := handlerstest.Decode[orch.StepRequest](t, s1Ev)
	if s1.Step != 1 || s1.Group.Expected != 1 || s1.Group.ID == "" || len(s1.Inputs) != 0 {
		t.Errorf("step.requested = step %d group %+v inputs %v, want step 1 of a group of 1, no inputs", s1.Step, s1.Group, s1.Inputs)
	}
	if s1.Run.Seq != pr.Run.Seq+1 || s1.Run.Plan.Status != orch.PlanExecuting {
		t.Errorf("run seq %d status %s, want %d executing", s1.Run.Seq, s1.Run.Plan.Status, pr.Run.Seq+1)
	}
	step1 := handlerstest.StepOf(t, s1.Run.Plan, 1)
	if step1.Status != orch.StepRunning || step1.TaskID == "" || step1.StartedAt.IsZero() {
		t.Errorf("step 1 = %+v, want running with a task id", step1)
	}
	if s := handlerstest.StepOf(t, s1.Run.Plan, 2); s.Status != orch.StepPending {
		t.Errorf("step 2 status %s, want pending", s.Status)
	}
	proj := handlerstest.AssertProjection(t, env, planID, store.PlanStatusExecuting, s1.Run.Seq)
	if len(proj.Steps) != 2 || proj.Steps[0].Status != store.StepStatusRunning || !slices.Equal(proj.Steps[1].InputFromStep, []int{1}) {
		t.Errorf("projected steps = %+v", proj.Steps)
	}

	// group.joined with step 1 complete: step 2 is dispatched with step 1's output as input.
	key1 := handlerstest.WriteMemory(t, env, s1.Run, step1, "outlet_ids", handlerstest.Step1Output)
	outs = handlerstest.Join(t, r, s1Ev, s1, orch.StepResult{Step: 1, TaskID: step1.TaskID, Outcome: orch.OutcomeComplete, MemoryKey: key1, Validated: true})
	s2Ev := handlerstest.Only(t, outs, events.TypeStepRequested)
	s2 := handlerstest.Decode[orch.StepRequest](t, s2Ev)
	if s2.Step != 2 || !slices.Equal(s2.Inputs, []string{key1}) {
		t.Errorf("step.requested = step %d inputs %v, want step 2 with inputs [%s]", s2.Step, s2.Inputs, key1)
	}
	if s2.Group.ID == s1.Group.ID || s2.Group.Expected != 1 {
		t.Errorf("step 2 group %+v, want a new group of 1 (step 1's was %s)", s2.Group, s1.Group.ID)
	}
	if got := handlerstest.StepOf(t, s2.Run.Plan, 1); got.Status != orch.StepComplete || got.MemoryKey != key1 || !got.Validated {
		t.Errorf("step 1 after join = %+v", got)
	}
	if s2.Run.Seq <= s1.Run.Seq {
		t.Errorf("seq %d did not advance past %d", s2.Run.Seq, s1.Run.Seq)
	}
	if got := handlerstest.AuditNames(outs); !slices.Contains(got, "step_1.complete") || !slices.Contains(got, "step_2.started") {
		t.Errorf("audit events %v", got)
	}
	handlerstest.AssertProjection(t, env, planID, store.PlanStatusExecuting, s2.Run.Seq)

	// group.joined with the last step complete: the run succeeds with the synthesised answer.
	step2 := handlerstest.StepOf(t, s2.Run.Plan, 2)
	key2 := handlerstest.WriteMemory(t, env, s2.Run, step2, "results", step2Output)
	outs = handlerstest.Join(t, r, s2Ev, s2, orch.StepResult{Step: 2, TaskID: step2.TaskID, Outcome: orch.OutcomeComplete, MemoryKey: key2, Validated: true})
	if n := len(handlerstest.OfType(outs, events.TypeStepRequested)); n != 0 {
		t.Errorf("got %d step.requested after the last step", n)
	}
	res := handlerstest.Decode[orch.RunResult](t, handlerstest.Only(t, outs, events.TypeRunFinished))
	if res.TerminalCode != orch.CodeSuccess || res.Status != orch.PlanComplete {
		t.Fatalf("run finished %s/%s (%s), want SUCCESS/complete", res.TerminalCode, res.Status, res.Reason)
	}
	if res.Response != wantAnswer {
		t.Errorf("response = %q, want %q", res.Response, wantAnswer)
	}
	if res.RunID != "run-ok" || res.PlanID != planID || res.TenantID != handlerstest.Tenant || res.SessionID != handlerstest.Session {
		t.Errorf("result identity = %+v", res)
	}
	if len(res.Steps) != 2 || res.Steps[0].Status != orch.StepComplete || res.Steps[1].Status != orch.StepComplete {
		t.Errorf("result steps = %+v", res.Steps)
	}
	_, fin := handlerstest.AuditOf(t, outs, "run.finished")
	if fin["terminal_code"] != orch.CodeSuccess {
		t.Errorf("run.finished audit = %v", fin)
	}
	p := handlerstest.AssertProjection(t, env, planID, store.PlanStatusComplete, s2.Run.Seq+2)
	if p.CompletedAt.IsZero() {
		t.Error("complete projection has no completed_at")
	}
}

func TestRouterReplansFailedStep(t *testing.T) {
	env := handlerstest.NewEnv(t)
	r := handlerstest.NewRouter(t, env)
	prEv, pr := handlerstest.StartRun(t, r, "run-replan")
	s1Ev := handlerstest.Only(t, handlerstest.Propose(t, r, prEv, pr.Run, handlerstest.TwoSteps()), events.TypeStepRequested)
	s1 := handlerstest.Decode[orch.StepRequest](t, s1Ev)
	step1 := handlerstest.StepOf(t, s1.Run.Plan, 1)

	fail := orch.StepResult{Step: 1, TaskID: step1.TaskID, Outcome: orch.OutcomeInsufficient,
		Reason: "skill outlet_list failed", Suggestion: "retry the step"}
	outs := handlerstest.Join(t, r, s1Ev, s1, fail)
	if n := len(handlerstest.OfType(outs, events.TypeStepRequested)) + len(handlerstest.OfType(outs, events.TypeRunFinished)); n != 0 {
		t.Errorf("a replan dispatched or finished: %v", handlerstest.Types(outs))
	}
	rpEv := handlerstest.Only(t, outs, events.TypePlanRequested)
	rp := handlerstest.Decode[orch.PlanRequest](t, rpEv)
	if rp.Failure == nil || rp.Failure.Step != 1 || rp.Failure.Reason != fail.Reason || rp.Failure.Suggestion != fail.Suggestion {
		t.Fatalf("replan failure = %+v, want step 1's result", rp.Failure)
	}
	plan := rp.Run.Plan
	if plan.ReplanCount != 1 || plan.Status != orch.PlanReplanning || len(plan.ReplanHistory) != 1 {
		t.Fatalf("plan replan_count %d status %s history %+v", plan.ReplanCount, plan.Status, plan.ReplanHistory)
	}
	if h := plan.ReplanHistory[0]; h.Attempt != 1 || h.FailedStep != 1 || h.Trigger != orch.OutcomeInsufficient {
		t.Errorf("replan record = %+v", h)
	}
	if s := handlerstest.StepOf(t, plan, 1); s.Status != orch.StepFailed || s.FailureReason != fail.Reason {
		t.Errorf("failed step = %+v", s)
	}
	for _, want := range []string{"step_1.failed", "replan.triggered"} {
		if !slices.Contains(handlerstest.AuditNames(outs), want) {
			t.Errorf("audit events %v lack %s", handlerstest.AuditNames(outs), want)
		}
	}
	handlerstest.AssertProjection(t, env, plan.PlanID, store.PlanStatusReplanning, rp.Run.Seq)

	// The revision replaces the failed step and the pending step that
	// depended on it; the new steps are numbered after them.
	revised := handlerstest.TwoSteps()
	revised[0].Index, revised[1].Index, revised[1].DependsOn = 3, 4, []int{3}
	outs = handlerstest.Propose(t, r, rpEv, rp.Run, revised)
	s3 := handlerstest.Decode[orch.StepRequest](t, handlerstest.Only(t, outs, events.TypeStepRequested))
	if s3.Step != 3 {
		t.Fatalf("dispatched step %d, want 3", s3.Step)
	}
	if !slices.Contains(handlerstest.AuditNames(outs), "plan.revised") {
		t.Errorf("audit events %v lack plan.revised", handlerstest.AuditNames(outs))
	}
	var statuses []string
	for _, s := range s3.Run.Plan.Steps {
		statuses = append(statuses, s.Status)
	}
	if want := []string{orch.StepRevised, orch.StepRevised, orch.StepRunning, orch.StepPending}; !slices.Equal(statuses, want) {
		t.Errorf("step statuses after the revision = %v, want %v", statuses, want)
	}
	if s3.Run.Plan.ReplanCount != 1 || s3.Run.Plan.Status != orch.PlanExecuting {
		t.Errorf("plan after revision: replan_count %d status %s", s3.Run.Plan.ReplanCount, s3.Run.Plan.Status)
	}
}

func TestRouterInfeasiblePlan(t *testing.T) {
	env := handlerstest.NewEnv(t)
	r := handlerstest.NewRouter(t, env)
	prEv, pr := handlerstest.StartRun(t, r, "run-impossible")
	ev := handlerstest.ChildEvent(t, prEv, "plan.proposed", events.TypePlanProposed,
		orch.PlanProposal{Run: pr.Run, Infeasible: "no discovered skill fits the task"})
	outs := handlerstest.HandleTwice(t, func() ([]event.Event, error) { return r.Handle(handlerstest.Ctx(t), ev) })
	if n := len(handlerstest.OfType(outs, events.TypeStepRequested)); n != 0 {
		t.Fatalf("an infeasible plan dispatched %d steps", n)
	}
	res := handlerstest.Decode[orch.RunResult](t, handlerstest.Only(t, outs, events.TypeRunFinished))
	if res.TerminalCode != orch.CodeImpossible || res.Status != orch.PlanFailed {
		t.Fatalf("run finished %s/%s, want IMPOSSIBLE/failed", res.TerminalCode, res.Status)
	}
	if !strings.Contains(res.Reason, "no discovered skill fits the task") || !strings.Contains(res.Response, res.Reason) {
		t.Errorf("reason %q response %q", res.Reason, res.Response)
	}
	handlerstest.AssertProjection(t, env, pr.Run.Plan.PlanID, store.PlanStatusFailed, pr.Run.Seq+1)
}

func TestRouterDeadLettered(t *testing.T) {
	env := handlerstest.NewEnv(t)
	r := handlerstest.NewRouter(t, env)
	_, pr := handlerstest.StartRun(t, r, "run-dead")
	stepData, err := json.Marshal(orch.StepRequest{Run: pr.Run, Step: 1})
	if err != nil {
		t.Fatal(err)
	}
	reqData, err := json.Marshal(handlerstest.RunRequest("run-dead2", handlerstest.RankTask))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		dl       events.DeadLetter
		wantCode string // "" means no output
		wantSess string
	}{
		{"orchestration message carrying the run", events.DeadLetter{Reason: "handler panicked", Subject: "agent.step.requested." + handlerstest.Tenant,
			RunID: "run-dead", Original: stepData}, orch.CodeRepeatedFailure, handlerstest.Session},
		{"run request", events.DeadLetter{Reason: "invalid request", Subject: "agent.run.requested." + handlerstest.Tenant,
			RunID: "run-dead2", Original: reqData, Headers: map[string][]string{"ce-" + events.ExtSession: {"sess-9"}}},
			orch.CodeValidationFail, "sess-9"},
		{"no run", events.DeadLetter{Reason: "garbage", Subject: "agent.step.requested." + handlerstest.Tenant, Original: []byte("x")}, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := handlerstest.NewEvent(t, "dl-"+tc.name, events.TypeDeadLettered, tc.dl)
			outs := handlerstest.HandleTwice(t, func() ([]event.Event, error) { return r.Handle(handlerstest.Ctx(t), ev) })
			if tc.wantCode == "" {
				if len(outs) != 0 {
					t.Fatalf("got %v, want no output", handlerstest.Types(outs))
				}
				return
			}
			res := handlerstest.Decode[orch.RunResult](t, handlerstest.Only(t, outs, events.TypeRunFinished))
			if res.TerminalCode != tc.wantCode || res.RunID != tc.dl.RunID || res.SessionID != tc.wantSess || res.Status != orch.PlanFailed {
				t.Errorf("result = %+v, want %s for %s in %s", res, tc.wantCode, tc.dl.RunID, tc.wantSess)
			}
			if !strings.Contains(res.Reason, tc.dl.Reason) {
				t.Errorf("reason %q lacks %q", res.Reason, tc.dl.Reason)
			}
		})
	}
}

func TestConstrainRoute(t *testing.T) {
	cases := []struct {
		name        string
		in          llm.RouteOutput
		wantType    string
		wantPattern string
	}{
		{"valid", llm.RouteOutput{TaskType: "research", Pattern: router.PatternPlanThenExecute}, "research", router.PatternPlanThenExecute},
		{"invalid pattern", llm.RouteOutput{TaskType: "summarisation", Pattern: router.PatternSupervisor}, "summarisation", router.PatternReact},
		{"unknown task type", llm.RouteOutput{TaskType: "poetry", Pattern: router.PatternReact}, "general", router.PatternReact},
		{"unknown type and pattern", llm.RouteOutput{TaskType: "poetry", Pattern: "freestyle"}, "general", router.PatternPlanThenExecute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := orch.ConstrainRoute(tc.in, router.DefaultTaskTypes)
			if got.TaskType != tc.wantType || got.Pattern != tc.wantPattern {
				t.Errorf("constrainRoute = %s/%s, want %s/%s", got.TaskType, got.Pattern, tc.wantType, tc.wantPattern)
			}
		})
	}
	// A configured default pattern wins over the first valid one.
	tts := []llm.TaskType{{Name: "audit", Patterns: []string{router.PatternReact, router.PatternSupervisor}, DefaultPattern: router.PatternSupervisor}}
	if got := orch.ConstrainRoute(llm.RouteOutput{TaskType: "audit", Pattern: "freestyle"}, tts); got.Pattern != router.PatternSupervisor {
		t.Errorf("invalid pattern became %s, want the default %s", got.Pattern, router.PatternSupervisor)
	}
}

// TestRouterRejectsInvalidRouteChoice: an adversarial routing model that
// picks a pattern its task type does not allow, then an unknown task type,
// is rejected each time with the options named, and the run goes on with
// its third, valid choice; one that never chooses validly ends the run
// VALIDATION_FAIL without a plan.
func TestRouterRejectsInvalidRouteChoice(t *testing.T) {
	env := handlerstest.NewEnv(t)
	r := handlerstest.NewRouter(t, env)
	model := llmtest.Sequence(
		handlerstest.TextResp(`{"task_type":"summarisation","pattern":"supervisor","reason":"x"}`),
		handlerstest.TextResp(`{"task_type":"poetry","pattern":"react","reason":"x"}`),
		handlerstest.TextResp(`{"task_type":"research","pattern":"plan-then-execute","reason":"ok"}`),
	)
	r.Model = model
	outs, err := r.Handle(handlerstest.Ctx(t), handlerstest.NewEvent(t, "run-route", events.TypeRunRequested, handlerstest.RunRequest("run-route", handlerstest.RankTask)))
	if err != nil {
		t.Fatal(err)
	}
	run := handlerstest.Decode[orch.PlanRequest](t, handlerstest.Only(t, outs, events.TypePlanRequested)).Run
	if run.TaskType != "research" || run.Pattern != router.PatternPlanThenExecute {
		t.Fatalf("route = %s/%s, want the repaired research/plan-then-execute", run.TaskType, run.Pattern)
	}
	reqs := model.Requests()
	if len(reqs) != 3 || !strings.Contains(handlerstest.LastMessage(reqs[1]), `pattern "supervisor" is not a valid pattern`) ||
		!strings.Contains(handlerstest.LastMessage(reqs[2]), `task_type "poetry" is not one of the configured task types`) {
		t.Fatalf("the model was asked %d times; repairs %q, %q", len(reqs), handlerstest.LastMessage(reqs[1]), handlerstest.LastMessage(reqs[2]))
	}

	bad := handlerstest.TextResp(`{"task_type":"poetry","pattern":"freestyle"}`)
	r.Model = llmtest.Sequence(bad, bad, bad)
	outs, err = r.Handle(handlerstest.Ctx(t), handlerstest.NewEvent(t, "run-route-bad", events.TypeRunRequested, handlerstest.RunRequest("run-route-bad", handlerstest.RankTask)))
	if err != nil {
		t.Fatal(err)
	}
	if res := handlerstest.Decode[orch.RunResult](t, handlerstest.Only(t, outs, events.TypeRunFinished)); res.TerminalCode != orch.CodeValidationFail {
		t.Fatalf("run ended %s, want VALIDATION_FAIL", res.TerminalCode)
	}
	if len(handlerstest.OfType(outs, events.TypePlanRequested)) != 0 {
		t.Fatal("an invalid route was planned")
	}
}
