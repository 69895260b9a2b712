package orch

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/agentbus/agentbus/domain"
)

// The budget vector and the token quotas are domain's vocabulary
// (domain/budget.go); orch names them.
type (
	Dim        = domain.Dim
	Vector     = domain.Vector
	Quotas     = domain.Quotas
	TokenQuota = domain.TokenQuota
	Quota      = domain.Quota
)

// The budget dimensions, quota scopes and periods.
const (
	DimInputTokens      = domain.DimInputTokens
	DimOutputTokens     = domain.DimOutputTokens
	DimCostUSD          = domain.DimCostUSD
	DimModelCalls       = domain.DimModelCalls
	DimToolCalls        = domain.DimToolCalls
	DimExternalCalls    = domain.DimExternalCalls
	DimWallClockS       = domain.DimWallClockS
	DimRetries          = domain.DimRetries
	DimReflectionPasses = domain.DimReflectionPasses
	DimMemoryWrites     = domain.DimMemoryWrites
	DimSideEffects      = domain.DimSideEffects

	QuotaTenant  = domain.QuotaTenant
	QuotaAgent   = domain.QuotaAgent
	QuotaSession = domain.QuotaSession
	PeriodDay    = domain.PeriodDay
	PeriodMonth  = domain.PeriodMonth
	PeriodTotal  = domain.PeriodTotal
)

var (
	// Dims are every budget dimension, in the order checks report them.
	Dims = domain.Dims
	// DefaultLimits are the limits of a run that no configuration narrows.
	DefaultLimits = domain.DefaultLimits
)

// Over returns the first dimension in which drawing want on top of used
// would pass limits, or "" (domain.Over).
func Over(limits, used, want Vector) Dim { return domain.Over(limits, used, want) }

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
		if k != "*" && !domain.ValidToken(k) {
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
	// Caps are the tenant's caps as the run started: no extension raises
	// a limit above them. Release is the tenant's release setting, if
	// it has one: the run may then park at a budget gate.
	Caps    Vector         `json:"caps,omitempty"`
	Release *BudgetRelease `json:"release,omitempty"`
}

// UsageVector is a model usage as budget dimensions.
func UsageVector(inTok, outTok, calls int, cost float64) Vector {
	return Vector{DimInputTokens: float64(inTok), DimOutputTokens: float64(outTok), DimModelCalls: float64(calls), DimCostUSD: cost}
}

// Remaining is what the run has left of its limits, as far as its state
// knows (work in flight may have drawn more).
func (s State) Remaining() Vector {
	out := Vector{}
	known := s.Known()
	for d, lim := range s.Budget.Limits {
		out[d] = max(0, lim-known[d])
	}
	return out
}

// Known is what the state knows the run has drawn: the model usage the
// router was told of and what finished work reported.
func (s State) Known() Vector {
	return s.Budget.Spent.Add(UsageVector(s.Usage.InputTokens, s.Usage.OutputTokens, s.Usage.Calls, s.Usage.CostUSD))
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
