package planner

import (
	"errors"
	"fmt"
	"slices"

	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/schema"
	"github.com/agentbus/agentbus/skills"
)

// ErrPlanInvalid marks a plan that failed the verification pass.
var ErrPlanInvalid = errors.New("handlers: plan failed verification")

// verifyPlan is the verification pass (seed 000 §2.2): every step uses
// skills that were loaded, its return_spec is satisfiable by the first
// skill's declared output schema, step numbers are fresh and ordered, and
// every dependency is an earlier step of the proposal or a completed step.
func verifyPlan(proposed []llm.PlannedStep, manifests map[string]skills.Manifest, first int, existing orch.Plan) ([]orch.Step, error) {
	known := map[int]bool{}
	for _, s := range existing.Steps {
		if s.Status == orch.StepComplete {
			known[s.Index] = true
		}
	}
	steps := make([]orch.Step, 0, len(proposed))
	for i, ps := range proposed {
		want := first + i
		if ps.Step != want {
			return nil, fmt.Errorf("%w: step %d is numbered %d", ErrPlanInvalid, want, ps.Step)
		}
		if len(ps.Skills) == 0 {
			return nil, fmt.Errorf("%w: step %d has no skill", ErrPlanInvalid, ps.Step)
		}
		for _, name := range ps.Skills {
			if _, ok := manifests[name]; !ok {
				return nil, fmt.Errorf("%w: step %d uses unknown skill %q", ErrPlanInvalid, ps.Step, name)
			}
		}
		if err := satisfiable(manifests[ps.Skills[0]], ps.ReturnSpec.Shape); err != nil {
			return nil, fmt.Errorf("%w: step %d: %v", ErrPlanInvalid, ps.Step, err)
		}
		for _, d := range ps.DependsOn {
			if !known[d] {
				return nil, fmt.Errorf("%w: step %d depends on step %d, which is neither earlier nor complete", ErrPlanInvalid, ps.Step, d)
			}
		}
		known[ps.Step] = true
		steps = append(steps, orch.Step{
			Index: ps.Step, Task: ps.Task, Skills: slices.Clone(ps.Skills), DependsOn: ps.DependsOn,
			ReturnSpec: orch.ReturnSpec{Shape: ps.ReturnSpec.Shape, Reason: ps.ReturnSpec.Reason}, Status: orch.StepPending,
			ModelOnly: ps.ModelOnly,
		})
	}
	return steps, nil
}

func satisfiable(m skills.Manifest, shape []byte) error {
	out, err := schema.ParseShape(m.OutputSchema)
	if err != nil {
		return err
	}
	want, err := schema.ParseShape(shape)
	if err != nil {
		return fmt.Errorf("return_spec: %w", err)
	}
	_, err = schema.Derive(out, want)
	return err
}
