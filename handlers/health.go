package handlers

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/events"
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

// DefaultHealthWindow is the window of GET /agent/health without one.
const DefaultHealthWindow = 24 * time.Hour

// maxWindow bounds a health window or an audit query's range.
const maxWindow = 90 * 24 * time.Hour

// health serves GET /agent/health?window=1h (or since/until): the
// caller's tenant's plan health.
func (g *Ingress) health(w http.ResponseWriter, r *http.Request) {
	tenant, ok := readScope(w, r)
	if !ok {
		return
	}
	now := g.now()
	since, until, err := timeRange(r, now, DefaultHealthWindow)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	h, err := TenantHealth(r.Context(), g.store, tenant, since, until)
	if g.storeError(w, err, "events") {
		return
	}
	writeJSON(w, http.StatusOK, h)
}

// auditEvents serves GET /agent/audit/events: the caller's tenant's
// events, newest first, filtered by type (repeatable), skill, time range
// (since, until: RFC 3339, or a duration before now such as 168h) and
// large_response, at most limit. For example
// ?type=skill.called&since=168h&large_response=true: every skill call of
// the last 7 days that triggered large-response handling.
func (g *Ingress) auditEvents(w http.ResponseWriter, r *http.Request) {
	tenant, ok := readScope(w, r)
	if !ok {
		return
	}
	params := r.URL.Query()
	q := store.EventQuery{TenantID: tenant, EventTypes: params["type"], SkillID: params.Get("skill"), Limit: store.DefaultEventLimit}
	var err error
	if q.Since, q.Until, err = timeRange(r, g.now(), 0); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	if v := params.Get("large_response"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request", "large_response must be true or false")
			return
		}
		q.LargeResponse = &b
	}
	if q.Limit, ok = queryLimit(w, params.Get("limit"), store.MaxEventLimit); !ok {
		return
	}
	for _, t := range q.EventTypes {
		if _, err := events.Subject(events.AuditType(t), tenant); err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("type %q is not an event name such as skill.called", t))
			return
		}
	}
	evs, err := g.store.Events(r.Context(), q)
	if g.storeError(w, err, "events") {
		return
	}
	if evs == nil {
		evs = []store.Event{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"tenant_id": tenant, "count": len(evs), "events": evs})
}

// queryLimit parses a limit query parameter v of 1 to most, answering
// 400 invalid_request itself when it is not one; 0 when v is empty.
func queryLimit(w http.ResponseWriter, v string, most int) (int, bool) {
	if v == "" {
		return 0, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		writeError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("limit must be 1 to %d", most))
		return 0, false
	}
	return n, true
}

// timeRange reads since and until (RFC 3339 times, or durations before
// now), or window (a duration before now). A zero def leaves an absent
// since unbounded; otherwise since defaults to now - def.
func timeRange(r *http.Request, now time.Time, def time.Duration) (since, until time.Time, err error) {
	params := r.URL.Query()
	at := func(name string) (time.Time, error) {
		v := params.Get(name)
		if v == "" {
			return time.Time{}, nil
		}
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			return now.Add(-d), nil
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return time.Time{}, fmt.Errorf("%s must be an RFC 3339 time or a duration such as 24h", name)
		}
		return t, nil
	}
	if since, err = at("since"); err != nil {
		return
	}
	if until, err = at("until"); err != nil {
		return
	}
	end := cmp.Or(until, now) // the range's end, bounded or not
	if v := params.Get("window"); v != "" {
		d, perr := time.ParseDuration(v)
		if perr != nil || d <= 0 || !since.IsZero() {
			return since, until, fmt.Errorf("window must be a positive duration such as 1h, and not sent with since")
		}
		since = end.Add(-d)
	}
	if since.IsZero() && def > 0 {
		since = end.Add(-def)
	}
	if !since.IsZero() && !until.IsZero() && !since.Before(until) {
		return since, until, fmt.Errorf("since must be before until")
	}
	if !since.IsZero() && end.Sub(since) > maxWindow {
		return since, until, fmt.Errorf("the range is longer than %d days", int(maxWindow.Hours()/24))
	}
	return since, until, nil
}

// RunSummary is one finished run as GET /agent/runs lists it.
type RunSummary struct {
	PlanID       string    `json:"plan_id"`
	SessionID    string    `json:"session_id,omitempty"`
	TerminalCode string    `json:"terminal_code"`
	TaskType     string    `json:"task_type,omitempty"`
	Replans      int       `json:"replans"`
	InputTokens  int       `json:"input_tokens"`
	OutputTokens int       `json:"output_tokens"`
	CostUSD      float64   `json:"cost_usd"`
	FinishedAt   time.Time `json:"finished_at"`
}

// recentRuns serves GET /agent/runs?limit=50 (and since, until): the caller's
// tenant's finished runs, newest first.
func (g *Ingress) recentRuns(w http.ResponseWriter, r *http.Request) {
	tenant, ok := readScope(w, r)
	if !ok {
		return
	}
	q := store.EventQuery{TenantID: tenant, EventTypes: []string{"run.finished"}, Limit: 50}
	var err error
	if q.Since, q.Until, err = timeRange(r, g.now(), 0); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	if q.Limit, ok = queryLimit(w, r.URL.Query().Get("limit"), 1000); !ok {
		return
	}
	evs, err := g.store.Events(r.Context(), q)
	if g.storeError(w, err, "events") {
		return
	}
	out := make([]RunSummary, 0, len(evs))
	for _, ev := range evs {
		out = append(out, RunSummary{PlanID: ev.PlanID, SessionID: ev.SessionID, TerminalCode: ev.Outcome, TaskType: ev.TaskType,
			Replans: ev.Replans, InputTokens: ev.InputTokens, OutputTokens: ev.OutputTokens, CostUSD: ev.CostUSD, FinishedAt: ev.TS})
	}
	writeJSON(w, http.StatusOK, map[string]any{"tenant_id": tenant, "runs": out})
}
