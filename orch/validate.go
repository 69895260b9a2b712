package orch

import (
	"errors"
	"fmt"
	"slices"

	"github.com/agentbus/agentbus/domain"
)

// The checks below run on every message before its handler does (the
// events runtime calls Validate and Tenant after a strict decode). They
// reject what no handler could use and name the field; a request's
// content (message, user, session) is the decider's to judge, so an
// invalid request ends its run instead of being dead-lettered.

var (
	outcomes = []string{OutcomeComplete, OutcomeFailed, OutcomeInsufficient, OutcomeContractViolation,
		OutcomeInvalidOutput, OutcomeUnavailable, OutcomeCancelled, OutcomeBudgetExhausted, OutcomeTimedOut,
		OutcomeRepeatedCall, OutcomePermissionDenied, OutcomeUnsafe, OutcomeAwaitingGate, OutcomeHandoff,
		OutcomeLowConfidence, OutcomeSourceConflict}
	stepStates = []string{StepPending, StepRunning, StepComplete, StepFailed, StepRevised, StepAwaitingGate}
	planStates = []string{PlanPending, PlanPlanning, PlanExecuting, PlanReplanning, PlanComplete, PlanFailed,
		PlanAwaitingGate, PlanPaused, PlanRejected, PlanExpired}
)

func field(name string, err error) error { return fmt.Errorf("%s: %w", name, err) }

var (
	errRequired = errors.New("is required")
	errUnknown  = errors.New("has an unknown value")
)

// Validate checks what routing needs: a run id and a tenant.
func (r RunRequest) Validate() error {
	switch {
	case r.RunID == "":
		return field("run_id", errRequired)
	case !domain.ValidToken(r.TenantID):
		return field("tenant_id", errors.New("must match [A-Za-z0-9_-]{1,64}"))
	}
	return nil
}

// Tenant is the request's tenant.
func (r RunRequest) Tenant() string { return r.TenantID }

// Validate checks a carried run state.
func (s RunState) Validate() error {
	if err := s.Request.Validate(); err != nil {
		return field("run.request", err)
	}
	switch {
	case s.Plan.PlanID == "":
		return field("run.plan.plan_id", errRequired)
	case !slices.Contains(planStates, s.Plan.Status):
		return field("run.plan.status", fmt.Errorf("%w %q", errUnknown, s.Plan.Status))
	case s.Seq < 1:
		return field("run.seq", errors.New("must be at least 1"))
	}
	for i, st := range s.Plan.Steps {
		if err := st.validate(); err != nil {
			return field(fmt.Sprintf("run.plan.steps[%d]", i), err)
		}
		if !slices.Contains(stepStates, st.Status) {
			return field(fmt.Sprintf("run.plan.steps[%d].status", i), fmt.Errorf("%w %q", errUnknown, st.Status))
		}
	}
	return nil
}

// Tenant is the run's tenant.
func (s RunState) Tenant() string { return s.Request.TenantID }

func (s Step) validate() error {
	switch {
	case s.Index < 1:
		return field("step", errors.New("must be at least 1"))
	case s.Task == "":
		return field("task", errRequired)
	}
	return nil
}

func (g Group) validate() error {
	switch {
	case g.ID == "":
		return field("group.id", errRequired)
	case g.Expected < 1:
		return field("group.expected", errors.New("must be at least 1"))
	}
	return nil
}

func (r StepResult) validate() error {
	switch {
	case r.Step < 1:
		return field("step", errors.New("must be at least 1"))
	case !slices.Contains(outcomes, r.Outcome):
		return field("outcome", fmt.Errorf("%w %q", errUnknown, r.Outcome))
	}
	return nil
}

// Validate checks a plan request.
func (p PlanRequest) Validate() error {
	if err := p.Run.Validate(); err != nil {
		return err
	}
	if p.Failure != nil {
		if err := p.Failure.validate(); err != nil {
			return field("failure", err)
		}
	}
	return nil
}

// Tenant is the run's tenant.
func (p PlanRequest) Tenant() string { return p.Run.Tenant() }

// Validate checks a proposal: steps within bounds, or a known code.
func (p PlanProposal) Validate() error {
	if err := p.Run.Validate(); err != nil {
		return err
	}
	if p.Code != "" && !ValidCode(p.Code) {
		return field("code", fmt.Errorf("%w %q", errUnknown, p.Code))
	}
	if err := p.Spent.Validate(); err != nil {
		return field("spent", err)
	}
	if len(p.Steps) > MaxPlanSteps {
		return field("steps", fmt.Errorf("has %d steps, at most %d are allowed", len(p.Steps), MaxPlanSteps))
	}
	for i, s := range p.Steps {
		if err := s.validate(); err != nil {
			return field(fmt.Sprintf("steps[%d]", i), err)
		}
	}
	if p.Code == "" && p.Infeasible == "" && len(p.Steps) == 0 {
		return field("steps", errors.New("are required unless the plan is infeasible"))
	}
	return nil
}

// Tenant is the run's tenant.
func (p PlanProposal) Tenant() string { return p.Run.Tenant() }

// Validate checks a step request: its step is a live step of the plan.
func (r StepRequest) Validate() error {
	if err := r.Run.Validate(); err != nil {
		return err
	}
	if err := r.Group.validate(); err != nil {
		return err
	}
	if r.Run.Plan.Live(r.Step) == nil {
		return field("step", fmt.Errorf("%d is not a live step of plan %s", r.Step, r.Run.Plan.PlanID))
	}
	if r.Iteration < 0 || r.Repairs < 0 {
		return field("iteration", errors.New("must not be negative"))
	}
	if err := r.Spent.Validate(); err != nil {
		return field("spent", err)
	}
	if err := r.Pooled.Validate(); err != nil {
		return field("pooled", err)
	}
	for key := range r.InputData {
		if !slices.Contains(r.Inputs, key) {
			return field("input_data", fmt.Errorf("%q is not one of the step's inputs", key))
		}
	}
	return nil
}

// Tenant is the run's tenant.
func (r StepRequest) Tenant() string { return r.Run.Tenant() }

// Tenant is the gate's run's tenant.
func (a ApprovalDecided) Tenant() string { return a.TenantID }

// Validate checks a finished step.
func (f StepFinished) Validate() error {
	if err := f.Run.Validate(); err != nil {
		return err
	}
	if err := f.Group.validate(); err != nil {
		return err
	}
	if err := f.Result.validate(); err != nil {
		return field("result", err)
	}
	return nil
}

// Tenant is the run's tenant.
func (f StepFinished) Tenant() string { return f.Run.Tenant() }

// Validate checks a step that joined its group of one: only a group of
// one may be joined by its member, so an executor can never join (or
// forge the join of) a group that waits for others.
func (j StepJoined) Validate() error {
	if err := StepFinished(j).Validate(); err != nil {
		return err
	}
	if j.Group.Expected != 1 {
		return field("group.expected", fmt.Errorf("is %d: only a group of one is joined by its member", j.Group.Expected))
	}
	return nil
}

// Tenant is the run's tenant.
func (j StepJoined) Tenant() string { return j.Run.Tenant() }

// Validate checks a joined group.
func (j GroupJoined) Validate() error {
	if err := j.Run.Validate(); err != nil {
		return err
	}
	if err := j.Group.validate(); err != nil {
		return err
	}
	if len(j.Results) == 0 {
		return field("results", errRequired)
	}
	for i, r := range j.Results {
		if err := r.validate(); err != nil {
			return field(fmt.Sprintf("results[%d]", i), err)
		}
	}
	return nil
}

// Tenant is the run's tenant.
func (j GroupJoined) Tenant() string { return j.Run.Tenant() }

// Validate checks a run's result.
func (r RunResult) Validate() error {
	switch {
	case r.RunID == "":
		return field("run_id", errRequired)
	case !ValidCode(r.TerminalCode):
		return field("terminal_code", fmt.Errorf("%w %q", errUnknown, r.TerminalCode))
	case !slices.Contains(planStates, r.Status):
		return field("status", fmt.Errorf("%w %q", errUnknown, r.Status))
	}
	return nil
}

// Tenant is the result's tenant.
func (r RunResult) Tenant() string { return r.TenantID }

// Validate checks a parked run's notice.
func (p RunParked) Validate() error {
	if err := ValidateID("tenant_id", p.TenantID); err != nil {
		return err
	}
	if p.RunID == "" || p.Gate.Gate == "" {
		return field("gate.gate_id", errRequired)
	}
	return nil
}

// Tenant is the parked run's tenant.
func (p RunParked) Tenant() string { return p.TenantID }
