package planner

import (
	"context"
	"errors"
	"fmt"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/rs/zerolog"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/ledger"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills"
)

// Planner is SubAgent-A: it discovers skills over MCP, loads their
// manifests, asks the model for a plan of at most 10 steps with
// return_specs, and verifies the plan against the skills' schemas before
// proposing it. On a replan it plans only the remaining work.
type Planner struct {
	Model  llm.Model
	Skills SkillFinder
	Log    zerolog.Logger
	// Candidates is how many skills find_relevant_skills may return; the
	// planner loads at most MaxLoads of them (2–6 in seed 000).
	Candidates int
	MaxLoads   int
	// Credentials forwards the caller's API key to the Skill Service; nil
	// uses the worker's configured key only.
	Credentials *runctl.Credentials
	// Records are the tenants' payload record choices: a tenant that
	// keeps them has its model calls' requests and answers traced; nil
	// keeps none.
	Records *runctl.RecordPolicy
	// Budgets is the budget ledger the planner's model calls and replans
	// (reflection passes) draw from; nil draws nothing.
	Budgets *ledger.Budgets
}

// NewPlanner returns a planner.
func NewPlanner(model llm.Model, sk SkillFinder, log zerolog.Logger) *Planner {
	return &Planner{Model: model, Skills: sk, Log: log, Candidates: 8, MaxLoads: 6}
}

// Routes are the events the planner consumes.
func (p *Planner) Routes() []events.Route {
	return []events.Route{events.On(events.TypePlanRequested, p.planRequested)}
}

// Handle is the planner's events.Handler.
func (p *Planner) Handle(ctx context.Context, ev event.Event) ([]event.Event, error) {
	return events.Dispatch(handlers.RolePlanner, p.Routes()...)(ctx, ev)
}

func (p *Planner) planRequested(ctx context.Context, ev event.Event, req orch.PlanRequest) ([]event.Event, error) {
	run := req.Run
	out := handlers.Outbox{In: ev}
	ctx, err := p.Credentials.Context(ctx, run.Request)
	if err != nil {
		return nil, err
	}
	rec := llm.Record(p.Model).KeepPayloads(p.Records.Keeps(run.Request.TenantID))
	rb := ledger.BudgetOf(run)
	var steps []orch.Step
	var infeasible string
	var spent orch.Vector // what the hop drew besides model usage, reported with the proposal
	if req.Failure != nil && req.Failure.Outcome != orch.OutcomeHandoff {
		// A replan is a reflection pass: it draws on its own budget (a
		// handoff's new plan is the target agent's first, not one).
		pass := orch.Vector{orch.DimReflectionPasses: 1}
		if err = p.Budgets.Reserve(ctx, rb, pass); err == nil {
			spent = pass
		}
	}
	if err == nil {
		model := p.Budgets.ReportingModel(rec, rb, func(v orch.Vector) { spent = spent.Add(v) })
		steps, infeasible, err = p.plan(ctx, handlers.AgentModel(model, run.Agent), run, req.Failure)
	}
	lin := events.Audit{PlanID: run.Plan.PlanID, UserID: run.Request.UserID}
	prop := orch.PlanProposal{Run: run, Steps: steps, Infeasible: infeasible, Usage: out.ModelCalls(lin, rec), Spent: spent}
	if err != nil {
		f := handlers.FailureOf(err)
		if f == nil {
			return nil, err
		}
		prop.Code, prop.Infeasible, prop.Evidence = f.Code, "planning failed: "+err.Error(), f.Evidence
		if f.Evidence != nil {
			out.Audit("budget.exhausted", lin, f.Evidence)
		}
	}
	out.Audit("plan.proposed", lin, map[string]any{"steps": len(steps), "infeasible": prop.Infeasible, "code": prop.Code,
		"replan": req.Failure != nil})
	out.Emit("plan.proposed", events.TypePlanProposed, prop)
	return out.Result()
}

// plan returns the verified steps, or the reason the task is infeasible,
// shaped by the run's pattern. Model calls go through model, which
// records them.
func (p *Planner) plan(ctx context.Context, model llm.Model, run orch.RunState, failure *orch.StepResult) ([]orch.Step, string, error) {
	manifests, infos, err := p.discover(ctx, run)
	if err != nil {
		return nil, "", err
	}
	switch run.Pattern {
	case orch.PatternReact:
		steps, infeasible := reactLoop(run, infos)
		return steps, infeasible, nil
	case orch.PatternSupervisor:
		return p.supervise(ctx, model, run, infos, failure)
	}
	in := llm.PlanInput{Task: run.Task(), Framing: run.Framing, Persona: run.Context.Persona, History: run.Context.History,
		Memories: run.Context.Memories, Skills: infos, MaxSteps: orch.MaxPlanSteps, FirstStep: 1}
	if failure != nil {
		addReplanContext(&in, run.Plan, *failure)
	}
	req := llm.NewRequest(llm.TaskPlan, in)
	req.Schema = llm.PlanSchema
	var po llm.PlanOutput
	var steps []orch.Step
	_, err = llm.StructuredCheck(ctx, model, req, &po, func() error {
		if po.Infeasible != "" {
			return nil
		}
		if len(po.Steps) == 0 {
			return errors.New("the plan has no step; propose steps or answer infeasible")
		}
		if n := countComplete(run.Plan) + len(po.Steps); n > orch.MaxPlanSteps {
			return fmt.Errorf("the plan needs %d steps; the limit is %d", n, orch.MaxPlanSteps)
		}
		var err error
		steps, err = verifyPlan(po.Steps, manifests, in.FirstStep, run.Plan)
		return err
	})
	if err != nil {
		return nil, "", err
	}
	if po.Infeasible != "" {
		return nil, po.Infeasible, nil
	}
	return steps, "", nil
}

// addReplanContext gives the model what completed, what failed and what
// remains, and numbers new steps after every existing one.
func addReplanContext(in *llm.PlanInput, plan orch.Plan, f orch.StepResult) {
	maxIdx := 0
	for _, s := range plan.Steps {
		maxIdx = max(maxIdx, s.Index)
		switch s.Status {
		case orch.StepComplete:
			in.Completed = append(in.Completed, llm.DoneStep{Step: s.Index, Task: s.Task, MemoryKey: s.MemoryKey})
		case orch.StepRevised:
		default:
			in.Remaining = append(in.Remaining, llm.PlannedStep{Step: s.Index, Task: s.Task, Skills: s.Skills,
				ReturnSpec: llm.ReturnSpec{Shape: s.ReturnSpec.Shape, Reason: s.ReturnSpec.Reason}, DependsOn: s.DependsOn})
		}
	}
	in.Failed = &llm.FailedStep{Step: f.Step, Reason: f.Reason, Suggestion: f.Suggestion}
	in.FirstStep = maxIdx + 1
}

// countComplete counts the steps a revision keeps.
func countComplete(p orch.Plan) int {
	n := 0
	for _, s := range p.Steps {
		if s.Status == orch.StepComplete {
			n++
		}
	}
	return n
}

// discover finds the skills relevant to the run's task and loads at most
// MaxLoads of their manifests, most relevant first.
func (p *Planner) discover(ctx context.Context, run orch.RunState) (map[string]skills.Manifest, []llm.SkillInfo, error) {
	tenant := run.Request.TenantID
	cands, err := p.Skills.Find(ctx, tenant, run.Task(), p.Candidates)
	if err != nil {
		return nil, nil, fmt.Errorf("handlers: find_relevant_skills: %w", err)
	}
	manifests := map[string]skills.Manifest{}
	var infos []llm.SkillInfo
	for _, c := range cands {
		if len(infos) == p.MaxLoads {
			break
		}
		if !run.Agent.Discovers(c.Name) {
			continue // the run's agent (a supervisor's: its sub-agents) does not allow it; the decider enforces it too
		}
		m, err := p.Skills.Load(ctx, tenant, c.Name)
		if errors.Is(err, skills.ErrSkillNotFound) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("handlers: load_skill %s: %w", c.Name, err)
		}
		manifests[m.Name] = m
		infos = append(infos, llm.SkillInfo{Name: m.Name, Description: m.Description, InputSchema: m.InputSchema, OutputSchema: m.OutputSchema})
	}
	return manifests, infos, nil
}

// nextIndex is the index after every step of the plan: a revision never
// reuses an index.
func nextIndex(plan orch.Plan) int {
	n := 0
	for _, s := range plan.Steps {
		n = max(n, s.Index)
	}
	return n + 1
}

// reactLoop is the ReACT pattern's one step: the user's task as a loop
// over the discovered skills (its allowed skills, enforced by the
// executor), answering in free text, bounded by the pattern's
// max_iterations. No model plans it.
func reactLoop(run orch.RunState, infos []llm.SkillInfo) ([]orch.Step, string) {
	if len(infos) == 0 {
		return nil, "no discovered skill fits the task"
	}
	names := make([]string, len(infos))
	for i, s := range infos {
		names[i] = s.Name
	}
	return []orch.Step{{Index: nextIndex(run.Plan), Task: run.Task(), Skills: names,
		ReturnSpec: orch.ReturnSpec{Shape: llm.LoopAnswerShape, Reason: "the loop's answer to the task"},
		Loop:       &orch.Loop{MaxTurns: run.PatternDef.MaxIterations}}}, ""
}

// SkillFinder is what the planner needs from the Skill Service.
type SkillFinder interface {
	Find(ctx context.Context, tenant, query string, limit int) ([]skills.Summary, error)
	Load(ctx context.Context, tenant, name string) (skills.Manifest, error)
}
