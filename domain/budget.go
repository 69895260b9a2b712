package domain

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
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
