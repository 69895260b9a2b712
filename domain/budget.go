package domain

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// Dim is one dimension of a run's budget vector (seed 003). Each is
// enforced on its own: none is converted into another.
type Dim string

// The budget dimensions.
const (
	DimInputTokens   Dim = "input_tokens"
	DimOutputTokens  Dim = "output_tokens"
	DimCostUSD       Dim = "cost_usd"
	DimModelCalls    Dim = "model_calls"
	DimToolCalls     Dim = "tool_calls"
	DimExternalCalls Dim = "external_calls"
	// DimWallClockS is the run's wall-clock allowance in seconds: it sets
	// the run's deadline rather than being drawn.
	DimWallClockS Dim = "wall_clock_s"
	// DimRetries counts model calls that repeat a rejected answer (repair
	// turns and structured-output repairs).
	DimRetries Dim = "retries"
	// DimReflectionPasses counts replans: a planner pass that diagnoses a
	// failed step and revises the plan.
	DimReflectionPasses Dim = "reflection_passes"
	DimMemoryWrites     Dim = "memory_writes"
	// DimSideEffects counts calls of skills that are not read-only.
	DimSideEffects Dim = "side_effects"
)

// Dims are every budget dimension, in the order checks report them.
var Dims = []Dim{DimInputTokens, DimOutputTokens, DimCostUSD, DimModelCalls, DimToolCalls, DimExternalCalls,
	DimWallClockS, DimRetries, DimReflectionPasses, DimMemoryWrites, DimSideEffects}

// Vector is an amount per dimension: a budget's limits, what a run has
// drawn, or what one call needs. An absent dimension is zero, or, in a
// layer of limits, not set by that layer.
type Vector map[Dim]float64

// DefaultLimits are the limits of a run that no configuration narrows:
// generous enough for long loops, finite in every dimension.
var DefaultLimits = Vector{
	DimInputTokens: 2_000_000, DimOutputTokens: 200_000, DimCostUSD: 10, DimModelCalls: 1500, DimToolCalls: 1500,
	DimExternalCalls: 500, DimWallClockS: 1800, DimRetries: 50, DimReflectionPasses: 10, DimMemoryWrites: 200,
	DimSideEffects: 100,
}

// Add returns v plus w.
func (v Vector) Add(w Vector) Vector {
	out := maps.Clone(v)
	if out == nil {
		out = Vector{}
	}
	for d, x := range w {
		out[d] += x
	}
	return out
}

// Sub returns v minus w.
func (v Vector) Sub(w Vector) Vector {
	neg := Vector{}
	for d, x := range w {
		neg[d] = -x
	}
	return v.Add(neg)
}

// Validate reports an unknown dimension or a negative or non-finite amount.
func (v Vector) Validate() error {
	for d, x := range v {
		if !slices.Contains(Dims, d) {
			return fmt.Errorf("budget dimension %q is not one of %v", d, Dims)
		}
		if x < 0 || math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("budget %s must be a finite number of at least 0", d)
		}
	}
	return nil
}

// Over returns the first dimension in which drawing want on top of used
// would pass limits, or "" when everything fits. Only dimensions want
// draws from count; wall clock is never drawn.
func Over(limits, used, want Vector) Dim {
	for _, d := range Dims {
		if want[d] <= 0 {
			continue
		}
		lim, ok := limits[d]
		if !ok {
			continue
		}
		if used[d]+want[d] > lim+1e-9 {
			return d
		}
	}
	return ""
}

// Quotas configure the token quotas (input plus output tokens) that every
// model call of a run draws from besides its own budget. Tenants and
// Agents are keyed by tenant id and "<tenant>/<agent_id>"; "*" applies to
// the tenants (agents) not named. An unset amount sets no quota.
type Quotas struct {
	Tenants map[string]TokenQuota `json:"tenants,omitempty"`
	Agents  map[string]TokenQuota `json:"agents,omitempty"`
	// SessionTokens bounds the tokens of all the runs of one session.
	SessionTokens float64 `json:"session_tokens,omitempty"`
}

// TokenQuota is a token allowance per UTC calendar day and month.
type TokenQuota struct {
	DailyTokens   float64 `json:"daily_tokens,omitempty"`
	MonthlyTokens float64 `json:"monthly_tokens,omitempty"`
}

// Quota scopes and periods.
const (
	QuotaTenant  = "tenant"
	QuotaAgent   = "agent"
	QuotaSession = "session"

	PeriodDay   = "day"
	PeriodMonth = "month"
	PeriodTotal = "total"
)

// Quota is one token allowance a run draws from: whose (Scope and
// Subject, within the run's tenant), over which period, and how many
// tokens it allows.
type Quota struct {
	Scope   string  `json:"scope"`
	Subject string  `json:"subject"`
	Period  string  `json:"period"`
	Tokens  float64 `json:"tokens"`
}

// Validate checks every amount and the agents' keys.
func (q *Quotas) Validate() error {
	if q == nil {
		return nil
	}
	amount := func(where string, x float64) error {
		if x < 0 || math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("budgets quotas.%s must be a finite number of at least 0", where)
		}
		return nil
	}
	for name, m := range map[string]map[string]TokenQuota{"tenants": q.Tenants, "agents": q.Agents} {
		for k, tq := range m {
			if name == "agents" && k != "*" {
				if t, a, ok := strings.Cut(k, "/"); !ok || !ValidToken(t) || !ValidToken(a) {
					return fmt.Errorf("budgets quotas.agents: key %q is not <tenant>/<agent_id> or *", k)
				}
			}
			if name == "tenants" && k != "*" && !ValidToken(k) {
				return fmt.Errorf("budgets quotas.tenants: key %q is not a tenant id or *", k)
			}
			if err := amount(name+"."+k+".daily_tokens", tq.DailyTokens); err != nil {
				return err
			}
			if err := amount(name+"."+k+".monthly_tokens", tq.MonthlyTokens); err != nil {
				return err
			}
		}
	}
	return amount("session_tokens", q.SessionTokens)
}

// ValidToken reports whether s can be a tenant or session id, which become
// subject tokens: 1 to 64 letters, digits, '_' or '-'.
func ValidToken(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// BudgetPolicy is the budget configuration (the config bucket's
// "budgets" key): the limits in layers and the escalation policy. A run's
// limits start from DefaultLimits, then the policy's Defaults, then the
// run's pattern (its run_timeout_s as wall clock), then its task type's
// limits, then the request's own; the tenant's caps bound the result.
type BudgetPolicy struct {
	Defaults  Vector            `json:"defaults,omitempty"`
	TaskTypes map[string]Vector `json:"task_types,omitempty"`
	// Tenants are caps: no layer may raise a limit above its tenant's.
	Tenants map[string]Vector `json:"tenants,omitempty"`
	// Escalation routes runs that cannot proceed within policy to review.
	Escalation *Escalation `json:"escalation,omitempty"`
	// Quotas are token allowances shared by many runs: per tenant and
	// agent per calendar day and month (UTC), per session in total.
	Quotas *Quotas `json:"quotas,omitempty"`
	// Release, by tenant ("*" for the tenants not named), lets an
	// operator release more budget to a run that would end
	// BUDGET_EXHAUSTED: the run parks at a budget gate instead (release.go).
	Release map[string]BudgetRelease `json:"release,omitempty"`
}

// WithDefaultDailyTokens is p giving a daily quota of tokens to every
// tenant it gives no quota of its own ("*" when it names none); 0 or less
// changes nothing. An operator's "*" entry, even an empty one (no quota),
// is kept.
func (p BudgetPolicy) WithDefaultDailyTokens(tokens float64) BudgetPolicy {
	if tokens <= 0 {
		return p
	}
	q := Quotas{}
	if p.Quotas != nil {
		q = *p.Quotas
	}
	if _, ok := q.Tenants["*"]; ok {
		return p
	}
	q.Tenants = maps.Clone(q.Tenants)
	if q.Tenants == nil {
		q.Tenants = map[string]TokenQuota{}
	}
	q.Tenants["*"] = TokenQuota{DailyTokens: tokens}
	p.Quotas = &q
	return p
}

// QuotasFor are the quotas a run of tenant, acting as agent (or "") in
// session, draws from, in a fixed order.
func (p BudgetPolicy) QuotasFor(tenant, agent, session string) []Quota {
	q := p.Quotas
	if q == nil {
		return nil
	}
	var out []Quota
	add := func(scope, subject string, tq TokenQuota) {
		if tq.DailyTokens > 0 {
			out = append(out, Quota{Scope: scope, Subject: subject, Period: PeriodDay, Tokens: tq.DailyTokens})
		}
		if tq.MonthlyTokens > 0 {
			out = append(out, Quota{Scope: scope, Subject: subject, Period: PeriodMonth, Tokens: tq.MonthlyTokens})
		}
	}
	pick := func(m map[string]TokenQuota, key string) TokenQuota {
		if tq, ok := m[key]; ok {
			return tq
		}
		return m["*"]
	}
	add(QuotaTenant, tenant, pick(q.Tenants, tenant))
	if agent != "" {
		add(QuotaAgent, agent, pick(q.Agents, tenant+"/"+agent))
	}
	if session != "" && q.SessionTokens > 0 {
		out = append(out, Quota{Scope: QuotaSession, Subject: session, Period: PeriodTotal, Tokens: q.SessionTokens})
	}
	return out
}

// QuotaLease is what a run holds of its token quotas: the tokens it may
// use before it asks them for more, taken at At (the run is charged to the
// periods it started in) from the ledger entries Keys, one per quota. A
// run takes a lease when it starts and settles it, with what it used,
// when it ends; in between its model calls draw from the lease in memory.
type QuotaLease struct {
	Tokens float64   `json:"tokens"`
	At     time.Time `json:"at"`
	Keys   []string  `json:"keys,omitempty"`
}

// Escalation is where a run goes when it cannot proceed within its
// policy: a run that would end with one of the On codes ends
// REVIEW_REQUIRED instead, with an escalation packet for Target.
type Escalation struct {
	Target string   `json:"target"`
	On     []string `json:"on"`
}

// Validate checks every layer and the escalation policy.
func (p BudgetPolicy) Validate() error {
	check := func(where string, v Vector) error {
		if err := v.Validate(); err != nil {
			return fmt.Errorf("budgets %s: %w", where, err)
		}
		return nil
	}
	if err := check("defaults", p.Defaults); err != nil {
		return err
	}
	for name, v := range p.TaskTypes {
		if err := check("task_types."+name, v); err != nil {
			return err
		}
	}
	for name, v := range p.Tenants {
		if err := check("tenants."+name, v); err != nil {
			return err
		}
	}
	if err := p.Quotas.Validate(); err != nil {
		return err
	}
	for k, r := range p.Release {
		if k != "*" && !ValidToken(k) {
			return fmt.Errorf("budgets release: key %q is not a tenant id or *", k)
		}
		if r.GateTTLS < 0 || r.MaxReleases < 0 {
			return fmt.Errorf("budgets release.%s: gate_ttl_s and max_releases must be at least 0", k)
		}
	}
	if e := p.Escalation; e != nil {
		if strings.TrimSpace(e.Target) == "" {
			return fmt.Errorf("budgets escalation: target is required")
		}
		for _, c := range e.On {
			if !slices.Contains(TerminalCodes, c) || c == CodeSuccess || c == CodeReviewRequired || c == CodeUserCancel {
				return fmt.Errorf("budgets escalation: %q cannot be escalated", c)
			}
		}
	}
	return nil
}

// Limits resolves a run's limits: DefaultLimits, then the policy's
// defaults, then the pattern's run timeout, then the task type's limits,
// then the request's, each layer replacing what it sets; finally the
// tenant's caps bound every dimension. Clamped names the dimensions a
// cap lowered below what a layer asked for.
func (p BudgetPolicy) Limits(tenant, taskType string, runTimeoutS int, request Vector) (limits Vector, clamped []Dim) {
	limits = maps.Clone(DefaultLimits)
	maps.Copy(limits, p.Defaults)
	if runTimeoutS > 0 {
		limits[DimWallClockS] = float64(runTimeoutS)
	}
	maps.Copy(limits, p.TaskTypes[taskType])
	maps.Copy(limits, request)
	for _, d := range Dims {
		if c, ok := p.Tenants[tenant][d]; ok && limits[d] > c {
			limits[d] = c
			clamped = append(clamped, d)
		}
	}
	return limits, clamped
}

// BudgetRelease is a tenant's release setting: how long a budget gate
// waits (gate_ttl_s; default the pattern's gate TTL) and how many
// extensions one run may be given (max_releases; default
// DefaultMaxReleases).
type BudgetRelease struct {
	GateTTLS    int `json:"gate_ttl_s,omitempty"`
	MaxReleases int `json:"max_releases,omitempty"`
}

// ReleaseFor is tenant's release setting (else the "*" one), nil when it
// has none: its runs end BUDGET_EXHAUSTED without a gate.
func (p BudgetPolicy) ReleaseFor(tenant string) *BudgetRelease {
	r, ok := p.Release[tenant]
	if !ok {
		r, ok = p.Release["*"]
	}
	if !ok {
		return nil
	}
	return &r
}

// UsageVector is a model usage as budget dimensions.
func UsageVector(inTok, outTok, calls int, cost float64) Vector {
	return Vector{DimInputTokens: float64(inTok), DimOutputTokens: float64(outTok), DimModelCalls: float64(calls), DimCostUSD: cost}
}

// LaneShare divides what a run has left among the n members of a group
// dispatched together (seed 003's per-lane budget): each member may draw
// share without asking anyone, and pool, the rest, is shared by the
// members through one compare-and-set entry, drawn only by a member that
// needs more than its share. A share is half of remaining split n ways,
// in whole units for the counted dimensions, so together the shares and
// the pool are exactly remaining and no lane is starved while another
// has left its share unused: the pool alone is at least half of it. A
// group of one gets everything as its share.
func LaneShare(remaining Vector, n int) (share, pool Vector) {
	if n <= 1 {
		return remaining.Add(nil), Vector{}
	}
	share, pool = Vector{}, Vector{}
	for d, r := range remaining {
		s := r / float64(2*n)
		if d != DimCostUSD {
			s = math.Floor(s)
		}
		share[d] = s
		pool[d] = max(0, r-s*float64(n))
	}
	return share, pool
}

// Terminal codes (seed 003). Every run ends with exactly one.
const (
	CodeSuccess          = "SUCCESS"
	CodePartialSuccess   = "PARTIAL_SUCCESS"
	CodeImpossible       = "IMPOSSIBLE"
	CodeMissingInfo      = "MISSING_INFO"
	CodeAmbiguousIntent  = "AMBIGUOUS_INTENT"
	CodeConfirmRequired  = "CONFIRM_REQUIRED"
	CodeReviewRequired   = "REVIEW_REQUIRED"
	CodeBudgetExhausted  = "BUDGET_EXHAUSTED"
	CodeTimeout          = "TIMEOUT"
	CodeValidationFail   = "VALIDATION_FAIL"
	CodeLowConfidence    = "LOW_CONFIDENCE"
	CodeSourceConflict   = "SOURCE_CONFLICT"
	CodeRepeatedFailure  = "REPEATED_FAILURE"
	CodePermissionDenied = "PERMISSION_DENIED"
	CodeUnsafeDetection  = "UNSAFE_DETECTION"
	CodeUnavailableDep   = "UNAVAILABLE_DEP"
	// CodeUserCancel: a user or operator cancelled the run (POST
	// /agent/runs/{run_id}/cancel). The run stops before its next hop: a
	// step in flight is stopped, no further step starts, the trace is kept.
	CodeUserCancel = "USER_CANCEL"
)

// TerminalCodes are seed 003's terminal codes.
var TerminalCodes = []string{CodeSuccess, CodePartialSuccess, CodeImpossible, CodeMissingInfo, CodeAmbiguousIntent,
	CodeConfirmRequired, CodeReviewRequired, CodeBudgetExhausted, CodeTimeout, CodeValidationFail,
	CodeLowConfidence, CodeSourceConflict, CodeRepeatedFailure, CodePermissionDenied, CodeUnsafeDetection,
	CodeUnavailableDep, CodeUserCancel}

// ValidCode reports whether code is a terminal code of seed 003.
func ValidCode(code string) bool { return slices.Contains(TerminalCodes, code) }

// Budget is what a run's state records of its budget: the resolved
// limits (every process checks its draws against them), what the run's
// finished work drew, and the escalation policy it runs under. The state
// is the run's ledger: a hop draws from the copy its message carries, in
// memory, and reports what it drew with its result; the router adds it.
type Budget struct {
	Limits Vector `json:"limits,omitempty"`
	// Spent sums what finished work reported besides model usage (tool
	// calls, memory writes, side effects, retries, reflection passes);
	// model usage is in RunState.Usage.
	Spent      Vector      `json:"spent,omitempty"`
	Escalation *Escalation `json:"escalation,omitempty"`
	// Quotas are the token quotas the run's model calls draw from
	// besides its limits (BudgetPolicy.QuotasFor), as resolved when the
	// run started.
	Quotas []Quota `json:"quotas,omitempty"`
	// Lease is what the run holds of its quotas (QuotaLease): taken when
	// it started, settled when it ends.
	Lease *QuotaLease `json:"quota_lease,omitempty"`
	// Caps are the tenant's caps as the run started: no extension raises
	// a limit above them. Release is the tenant's release setting, if
	// it has one: the run may then park at a budget gate.
	Caps    Vector         `json:"caps,omitempty"`
	Release *BudgetRelease `json:"release,omitempty"`
}

// Extend is what extension adds to the budget's limits: each amount,
// bounded by the tenant's cap of its dimension (clamped names the
// dimensions a cap lowered). The wall clock is not extended: it is the
// run's deadline, already scheduled.
func (b Budget) Extend(extension Vector) (granted Vector, clamped []Dim) {
	granted = Vector{}
	for _, d := range Dims {
		x, ok := extension[d]
		if !ok || x <= 0 || d == DimWallClockS {
			continue
		}
		lim := b.Limits[d]
		if c, capped := b.Caps[d]; capped && lim+x > c {
			x = max(0, c-lim)
			clamped = append(clamped, d)
		}
		if x > 0 {
			granted[d] = x
		}
	}
	return granted, clamped
}
