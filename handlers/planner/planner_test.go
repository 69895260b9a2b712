package planner_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/planner"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/offline"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/schema"
	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/skills/demo"
)

func completedStep(i int) orch.Step {
	return orch.Step{Index: i, Task: fmt.Sprintf("step %d", i), Skills: []string{"outlet_list"},
		ReturnSpec: orch.ReturnSpec{Shape: json.RawMessage(handlerstest.OutletIDsShape)}, Status: orch.StepComplete,
		TaskID: fmt.Sprintf("task-%d", i), MemoryKey: fmt.Sprintf("%s:%s:task-%d:outlet_ids", handlerstest.Tenant, handlerstest.Session, i)}
}

func TestPlannerProposes(t *testing.T) {
	env := handlerstest.NewEnv(t)
	failedRun := handlerstest.PlanRun("run-p3", handlerstest.RankTask, completedStep(1), orch.Step{Index: 2, Task: "rank", Skills: []string{"engagement_analytics"},
		ReturnSpec: orch.ReturnSpec{Shape: json.RawMessage(handlerstest.ResultsShape)}, DependsOn: []int{1}, Status: orch.StepFailed, TaskID: "task-2"})
	failedRun.Plan.Status, failedRun.Plan.ReplanCount = orch.PlanReplanning, 1
	var nine []orch.Step
	for i := 1; i <= 9; i++ {
		nine = append(nine, completedStep(i))
	}
	fullRun := handlerstest.PlanRun("run-p4", handlerstest.RankTask, append(nine, orch.Step{Index: 10, Task: "rank", Skills: []string{"engagement_analytics"},
		ReturnSpec: orch.ReturnSpec{Shape: json.RawMessage(handlerstest.ResultsShape)}, Status: orch.StepFailed})...)
	cases := []struct {
		name           string
		run            orch.RunState
		failure        *orch.StepResult
		wantSteps      []int // step numbers; nil means infeasible
		wantInfeasible string
	}{
		{name: "fresh plan", run: handlerstest.PlanRun("run-p1", handlerstest.RankTask), wantSteps: []int{1, 2}},
		{name: "unrelated task", run: handlerstest.PlanRun("run-p2", "bake a cake"), wantInfeasible: "no discovered skill fits the task"},
		{name: "replan numbers after existing steps", run: failedRun,
			failure: &orch.StepResult{Step: 2, TaskID: "task-2", Outcome: orch.OutcomeFailed, Reason: "boom", Suggestion: "retry"}, wantSteps: []int{3}},
		{name: "replan of the tenth step stays within the limit", run: fullRun,
			failure: &orch.StepResult{Step: 10, Outcome: orch.OutcomeFailed, Reason: "boom"}, wantSteps: []int{11}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			model := handlerstest.Recording()
			p := planner.NewPlanner(model, env.Skills, handlerstest.NopLog)
			ev := handlerstest.NewEvent(t, "plan-req-"+tc.run.Request.RunID, events.TypePlanRequested, orch.PlanRequest{Run: tc.run, Failure: tc.failure})
			outs := handlerstest.HandleTwice(t, func() ([]event.Event, error) { return p.Handle(handlerstest.Ctx(t), ev) })
			prop := handlerstest.Decode[orch.PlanProposal](t, handlerstest.Only(t, outs, events.TypePlanProposed))
			if _, payload := handlerstest.AuditOf(t, outs, "plan.proposed"); payload["replan"] != (tc.failure != nil) {
				t.Errorf("plan.proposed audit = %v", payload)
			}
			if prop.Run.Plan.PlanID != tc.run.Plan.PlanID || prop.Run.Seq != tc.run.Seq {
				t.Errorf("the planner changed the run state: %+v", prop.Run)
			}
			if tc.wantSteps == nil {
				if len(prop.Steps) != 0 || !strings.Contains(prop.Infeasible, tc.wantInfeasible) {
					t.Fatalf("proposal steps %d infeasible %q, want infeasible %q", len(prop.Steps), prop.Infeasible, tc.wantInfeasible)
				}
				return
			}
			if prop.Infeasible != "" {
				t.Fatalf("Infeasible = %q", prop.Infeasible)
			}
			if got := handlerstest.StepIndexes(prop.Steps); !slices.Equal(got, tc.wantSteps) {
				t.Fatalf("steps %v, want %v", got, tc.wantSteps)
			}
			if tc.failure != nil {
				// A replan revises only the failed step: same skill, and
				// its dependency on the completed step is kept.
				rev := prop.Steps[0]
				if len(prop.Steps) != 1 || !slices.Equal(rev.Skills, []string{demo.SkillEngagementAnalytics}) {
					t.Fatalf("revised steps %+v", prop.Steps)
				}
				if tc.name == "replan numbers after existing steps" && !slices.Equal(rev.DependsOn, []int{1}) {
					t.Fatalf("revised step depends on %v, want the completed step 1", rev.DependsOn)
				}
				return
			}
			first, second := prop.Steps[0], prop.Steps[1]
			if !slices.Equal(first.Skills, []string{demo.SkillOutletList}) || !slices.Equal(second.Skills, []string{demo.SkillEngagementAnalytics}) {
				t.Errorf("skills %v then %v", first.Skills, second.Skills)
			}
			if !slices.Equal(second.DependsOn, []int{first.Index}) || len(first.DependsOn) != 0 {
				t.Errorf("depends_on %v then %v", first.DependsOn, second.DependsOn)
			}
			for _, s := range prop.Steps {
				if s.Status != orch.StepPending || s.Task == "" || len(s.ReturnSpec.Shape) == 0 {
					t.Errorf("step %+v is not a verified pending step", s)
				}
			}
			// Step 1's contract is exactly what step 2's skill needs.
			if err := schema.Validate(first.ReturnSpec.Shape, []byte(handlerstest.Step1Output)); err != nil {
				t.Errorf("step 1 return_spec rejects outlet ids: %v", err)
			}
			if err := schema.Validate(first.ReturnSpec.Shape, []byte(`{"outlets":[]}`)); err == nil {
				t.Errorf("step 1 return_spec %s accepts data without outlet_ids", first.ReturnSpec.Shape)
			}
			// The model saw the loaded manifests and, on a replan, the context.
			in, ok := model.Requests()[0].Input.(llm.PlanInput)
			if !ok {
				t.Fatalf("model input %T", model.Requests()[0].Input)
			}
			var names []string
			for _, s := range in.Skills {
				names = append(names, s.Name)
				if len(s.InputSchema) == 0 || len(s.OutputSchema) == 0 {
					t.Errorf("skill %s given without schemas", s.Name)
				}
			}
			if !slices.Contains(names, demo.SkillOutletList) || !slices.Contains(names, demo.SkillEngagementAnalytics) {
				t.Errorf("model saw skills %v", names)
			}
			if in.MaxSteps != orch.MaxPlanSteps || in.FirstStep != tc.wantSteps[0] {
				t.Errorf("max_steps %d first_step %d", in.MaxSteps, in.FirstStep)
			}
			if tc.failure != nil {
				if in.Failed == nil || in.Failed.Step != tc.failure.Step || in.Failed.Reason != tc.failure.Reason {
					t.Errorf("failed step given to the model = %+v", in.Failed)
				}
				if len(in.Completed) != 1 || in.Completed[0].Step != 1 || in.Completed[0].MemoryKey == "" {
					t.Errorf("completed steps given to the model = %+v", in.Completed)
				}
			}
		})
	}
}

func TestPlannerRejectsUnverifiablePlan(t *testing.T) {
	env := handlerstest.NewEnv(t)
	plan := func(steps string) llm.Response { return handlerstest.TextResp(`{"steps":` + steps + `}`) }
	cases := []struct {
		name string
		resp llm.Response
		want string
	}{
		{"unknown skill", plan(`[{"step":1,"task":"t","skills":["launch_rocket"],"return_spec":{"shape":{"type":"object"}}}]`), `unknown skill "launch_rocket"`},
		{"skill outside the tenant catalog", plan(`[{"step":1,"task":"t","skills":["acme_loyalty_report"],"return_spec":{"shape":{"type":"object"}}}]`), `unknown skill "acme_loyalty_report"`},
		{"no steps", plan(`[]`), "the plan has no step"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := planner.NewPlanner(handlerstest.Repeating(tc.resp), env.Skills, handlerstest.NopLog)
			ev := handlerstest.NewEvent(t, "plan-req-"+tc.name, events.TypePlanRequested, orch.PlanRequest{Run: handlerstest.PlanRun("run-v", handlerstest.RankTask)})
			outs, err := p.Handle(handlerstest.Ctx(t), ev)
			if err != nil {
				t.Fatalf("Handle: %v", err)
			}
			prop := handlerstest.Decode[orch.PlanProposal](t, handlerstest.Only(t, outs, events.TypePlanProposed))
			if len(prop.Steps) != 0 || prop.Code != orch.CodeValidationFail || !strings.Contains(prop.Infeasible, tc.want) {
				t.Errorf("proposal steps %v code %q reason %q, want VALIDATION_FAIL naming %q", prop.Steps, prop.Code, prop.Infeasible, tc.want)
			}
		})
	}
	t.Run("wrong event type", func(t *testing.T) {
		p := planner.NewPlanner(offline.New(), env.Skills, handlerstest.NopLog)
		_, err := p.Handle(handlerstest.Ctx(t), handlerstest.NewEvent(t, "x", events.TypeRunRequested, handlerstest.RunRequest("r", handlerstest.RankTask)))
		if !errors.Is(err, events.ErrUnknownType) || !events.IsPermanent(err) {
			t.Errorf("err = %v, want a permanent ErrUnknownType", err)
		}
	})
}

func TestVerifyPlan(t *testing.T) {
	env := handlerstest.NewEnv(t)
	manifests := map[string]skills.Manifest{}
	for _, name := range []string{demo.SkillOutletList, demo.SkillEngagementAnalytics} {
		m, err := env.Skills.Load(handlerstest.Ctx(t), handlerstest.Tenant, name)
		if err != nil {
			t.Fatalf("Load(%s): %v", name, err)
		}
		manifests[name] = m
	}
	step := func(n int, skill, shape string, deps ...int) llm.PlannedStep {
		return llm.PlannedStep{Step: n, Task: fmt.Sprintf("step %d", n), Skills: []string{skill},
			ReturnSpec: llm.ReturnSpec{Shape: json.RawMessage(shape)}, DependsOn: deps}
	}
	good := []llm.PlannedStep{step(1, "outlet_list", handlerstest.OutletIDsShape), step(2, "engagement_analytics", handlerstest.ResultsShape, 1)}
	withCompleted := orch.Plan{Steps: []orch.Step{completedStep(1), {Index: 2, Status: orch.StepFailed}}}
	cases := []struct {
		name     string
		proposed []llm.PlannedStep
		first    int
		existing orch.Plan
		wantErr  string // "" means valid
	}{
		{"valid chain", good, 1, orch.Plan{}, ""},
		{"valid replan on a completed step", []llm.PlannedStep{step(3, "engagement_analytics", handlerstest.ResultsShape, 1)}, 3, withCompleted, ""},
		{"unknown skill", []llm.PlannedStep{step(1, "menu_catalog", `{"type":"object"}`)}, 1, orch.Plan{}, `unknown skill "menu_catalog"`},
		{"no skill", []llm.PlannedStep{{Step: 1, Task: "t", ReturnSpec: llm.ReturnSpec{Shape: json.RawMessage(handlerstest.OutletIDsShape)}}}, 1, orch.Plan{}, "has no skill"},
		{"unsatisfiable return_spec", []llm.PlannedStep{step(1, "outlet_list",
			`{"type":"object","properties":{"revenue":{"type":"number"}},"required":["revenue"]}`)}, 1, orch.Plan{}, `field "revenue"`},
		{"wrong field type", []llm.PlannedStep{step(1, "outlet_list",
			`{"type":"object","properties":{"outlets":{"type":"string"}}}`)}, 1, orch.Plan{}, `field "outlets"`},
		{"return_spec not a schema", []llm.PlannedStep{step(1, "outlet_list", `"outlets"`)}, 1, orch.Plan{}, "return_spec"},
		{"numbering starts wrong", []llm.PlannedStep{step(2, "outlet_list", handlerstest.OutletIDsShape)}, 1, orch.Plan{}, "step 1 is numbered 2"},
		{"numbering skips", []llm.PlannedStep{good[0], step(3, "engagement_analytics", handlerstest.ResultsShape, 1)}, 1, orch.Plan{}, "step 2 is numbered 3"},
		{"replan reuses an old number", []llm.PlannedStep{step(1, "outlet_list", handlerstest.OutletIDsShape)}, 3, withCompleted, "step 3 is numbered 1"},
		{"dependency on a later step", []llm.PlannedStep{step(1, "outlet_list", handlerstest.OutletIDsShape, 2), step(2, "engagement_analytics", handlerstest.ResultsShape)}, 1, orch.Plan{}, "depends on step 2"},
		{"dependency on itself", []llm.PlannedStep{step(1, "outlet_list", handlerstest.OutletIDsShape, 1)}, 1, orch.Plan{}, "depends on step 1"},
		{"dependency on a failed step", []llm.PlannedStep{step(3, "engagement_analytics", handlerstest.ResultsShape, 2)}, 3, withCompleted, "depends on step 2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			steps, err := planner.VerifyPlan(tc.proposed, manifests, tc.first, tc.existing)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("verifyPlan: %v", err)
				}
				if len(steps) != len(tc.proposed) {
					t.Fatalf("got %d steps, want %d", len(steps), len(tc.proposed))
				}
				for i, s := range steps {
					p := tc.proposed[i]
					if s.Index != p.Step || s.Status != orch.StepPending || !slices.Equal(s.Skills, p.Skills) ||
						!slices.Equal(s.DependsOn, p.DependsOn) || string(s.ReturnSpec.Shape) != string(p.ReturnSpec.Shape) {
						t.Errorf("step %d = %+v, from %+v", i, s, p)
					}
				}
				return
			}
			if !errors.Is(err, planner.ErrPlanInvalid) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want ErrPlanInvalid containing %q", err, tc.wantErr)
			}
			if steps != nil {
				t.Errorf("got steps %+v with an error", steps)
			}
		})
	}
}
