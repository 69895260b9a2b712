package health

import (
	"cmp"
	"context"
	"slices"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/sandbox"
	"github.com/agentbus/agentbus/store"
)

// Monitoring (seed 000 §10). Layer 3, the skill-call audit, is the
// agent_events index: the projector copies each call's figures (skill,
// duration, sizes, large-response flag, tokens, cost) into queryable
// fields, and GET /agent/audit/events queries them. Layer 4, plan health,
// is computed from the same events over a window (GET /agent/health).

// EventQuerier queries a tenant's stored events.
type EventQuerier interface {
	Events(ctx context.Context, q store.EventQuery) ([]store.Event, error)
}

// HealthEventTypes are the events plan health is computed from.
var HealthEventTypes = []string{"run.finished", "skill.called", "skill.timeout", "skill.refused", "circuit.refused",
	"subagent.finish", "contract_violation", "budget.exhausted", "python_script.executed", "memory.written"}

// Health is a tenant's plan health over a window: how its runs ended, how
// often they replanned, how its skills and steps fared, what it spent.
type Health struct {
	TenantID string    `json:"tenant_id"`
	Since    time.Time `json:"since"`
	Until    time.Time `json:"until"`
	// Runs finished in the window, by terminal code. SuccessRate is the
	// share that ended SUCCESS without replanning (seed 000's plan success
	// rate); CompletedRate the share that ended SUCCESS at all.
	Runs          int            `json:"runs"`
	TerminalCodes map[string]int `json:"terminal_codes"`
	SuccessRate   float64        `json:"success_rate"`
	CompletedRate float64        `json:"completed_rate"`
	// AvgReplansByTaskType is the mean number of replans of a run, by the
	// task type it was routed to.
	AvgReplansByTaskType map[string]float64 `json:"avg_replans_by_task_type"`
	// ReplanExhaustionRate is the share of runs stopped because their
	// replans (reflection passes) ran out.
	ReplanExhaustionRate float64 `json:"replan_exhaustion_rate"`
	// SkillCalls made; SkillFailureRate is, by skill, the share of its
	// calls that failed; LargeResponseRate the share of all calls whose
	// response took the large-response path.
	SkillCalls        int                `json:"skill_calls"`
	SkillFailureRate  map[string]float64 `json:"skill_failure_rate"`
	LargeResponseRate float64            `json:"large_response_rate"`
	// StepFailureRateBySkill is, by skill, the share of the finished
	// steps that called it (or tried to) and did not complete.
	StepFailureRateBySkill map[string]float64 `json:"step_failure_rate_by_skill"`
	// Steps (subagents) finished; SubagentP95MS is the 95th percentile of
	// their durations. ContractViolationRate is the share of step outputs
	// (memory writes) that broke their contract.
	Steps                 int     `json:"steps"`
	SubagentP95MS         int64   `json:"subagent_p95_ms"`
	ContractViolations    int     `json:"contract_violations"`
	ContractViolationRate float64 `json:"contract_violation_rate"`
	// PythonRuns counts extraction scripts run in the sandbox;
	// PythonTimeoutRate is the share killed by its timeout.
	PythonRuns        int     `json:"python_runs"`
	PythonTimeoutRate float64 `json:"python_timeout_rate"`
	// MemoryWrites counts step outputs written; MemoryLockWaitMaxMS is the
	// longest any of them waited for its memory lock.
	MemoryWrites        int   `json:"memory_writes"`
	MemoryLockWaitMaxMS int64 `json:"memory_lock_wait_max_ms"`
	// Tokens and cost of the runs that finished in the window.
	InputTokens  int     `json:"input_tokens"`
	OutputTokens int     `json:"output_tokens"`
	CostUSD      float64 `json:"cost_usd"`
	// Truncated: the window held more events than one computation reads
	// (store.MaxEventLimit); the figures cover the newest of them.
	Truncated bool `json:"truncated,omitempty"`
}

// ComputeHealth computes the plan health of tenant's events evs (those of
// HealthEventTypes in [since, until)).
func ComputeHealth(tenant string, since, until time.Time, evs []store.Event) Health {
	h := Health{TenantID: tenant, Since: since.UTC(), Until: until.UTC(), TerminalCodes: map[string]int{},
		AvgReplansByTaskType: map[string]float64{}, SkillFailureRate: map[string]float64{}, StepFailureRateBySkill: map[string]float64{}}
	taskSkills := map[string]map[string]bool{} // the skills each step (task id) called or tried to
	uses := func(task, skill string) {
		if task == "" || skill == "" {
			return
		}
		if taskSkills[task] == nil {
			taskSkills[task] = map[string]bool{}
		}
		taskSkills[task][skill] = true
	}
	stepOutcomes := map[string]string{} // task id -> outcome
	replans, runsByType := map[string]int{}, map[string]int{}
	calls, failed := map[string]int{}, map[string]int{}
	var large, violations, exhausted, pyTimeouts, firstTime int
	var durations []int64
	for _, ev := range evs {
		switch ev.EventType {
		case "run.finished":
			h.Runs++
			h.TerminalCodes[ev.Outcome]++
			if ev.Outcome == orch.CodeSuccess && ev.Replans == 0 {
				firstTime++
			}
			taskType := cmp.Or(ev.TaskType, "unrouted")
			replans[taskType] += ev.Replans
			runsByType[taskType]++
			h.InputTokens += ev.InputTokens
			h.OutputTokens += ev.OutputTokens
			h.CostUSD += ev.CostUSD
		case "skill.timeout", "skill.refused", "circuit.refused":
			uses(ev.TaskID, ev.SkillID)
		case "skill.called":
			uses(ev.TaskID, ev.SkillID)
			h.SkillCalls++
			calls[ev.SkillID]++
			if ev.Outcome == "error" {
				failed[ev.SkillID]++
			}
			if ev.LargeResponse {
				large++
			}
		case "subagent.finish":
			h.Steps++
			durations = append(durations, ev.DurationMS)
			if ev.TaskID != "" {
				stepOutcomes[ev.TaskID] = ev.Outcome
			}
		case "contract_violation":
			violations++
		case "python_script.executed":
			h.PythonRuns++
			if ev.Outcome == sandbox.ReasonTimeout {
				pyTimeouts++
			}
		case "memory.written":
			h.MemoryWrites++
			h.MemoryLockWaitMaxMS = max(h.MemoryLockWaitMaxMS, ev.DurationMS)
		case "budget.exhausted":
			var p struct {
				Dimension string `json:"dimension"`
			}
			if json.Unmarshal(ev.Payload, &p) == nil && p.Dimension == string(orch.DimReflectionPasses) {
				exhausted++
			}
		}
	}
	h.SuccessRate = ratio(firstTime, h.Runs)
	h.CompletedRate = ratio(h.TerminalCodes[orch.CodeSuccess], h.Runs)
	steps, failedSteps := map[string]int{}, map[string]int{}
	for task, outcome := range stepOutcomes {
		for skill := range taskSkills[task] {
			steps[skill]++
			if outcome != orch.OutcomeComplete {
				failedSteps[skill]++
			}
		}
	}
	for skill, n := range steps {
		h.StepFailureRateBySkill[skill] = ratio(failedSteps[skill], n)
	}
	h.ReplanExhaustionRate = ratio(exhausted, h.Runs)
	for t, n := range runsByType {
		h.AvgReplansByTaskType[t] = ratio(replans[t], n)
	}
	for skill, n := range calls {
		h.SkillFailureRate[skill] = ratio(failed[skill], n)
	}
	h.LargeResponseRate = ratio(large, h.SkillCalls)
	h.ContractViolations = violations
	h.ContractViolationRate = ratio(violations, h.MemoryWrites+violations)
	h.PythonTimeoutRate = ratio(pyTimeouts, h.PythonRuns)
	h.SubagentP95MS = percentile(durations, 0.95)
	h.CostUSD = float64(int64(h.CostUSD*1e6+0.5)) / 1e6
	return h
}

// ratio is n/of, 0 when of is 0.
func ratio(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}

// percentile returns the p-th percentile (nearest rank) of vs, 0 for none.
func percentile(vs []int64, p float64) int64 {
	if len(vs) == 0 {
		return 0
	}
	slices.Sort(vs)
	rank := int(float64(len(vs))*p+0.999999) - 1
	return vs[min(max(rank, 0), len(vs)-1)]
}

// TenantHealth computes the tenant's plan health over [since, until).
func TenantHealth(ctx context.Context, q EventQuerier, tenant string, since, until time.Time) (Health, error) {
	evs, err := q.Events(ctx, store.EventQuery{TenantID: tenant, EventTypes: HealthEventTypes, Since: since, Until: until,
		Limit: store.MaxEventLimit})
	if err != nil {
		return Health{}, err
	}
	h := ComputeHealth(tenant, since, until, evs)
	h.Truncated = len(evs) == store.MaxEventLimit
	return h, nil
}
