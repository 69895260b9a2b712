package orch

import "github.com/agentbus/agentbus/domain"

// The budget vector and the token quotas are domain's vocabulary
// (domain/budget.go); orch names them.
type (
	Dim        = domain.Dim
	Vector     = domain.Vector
	Quotas     = domain.Quotas
	TokenQuota = domain.TokenQuota
	Quota      = domain.Quota
	QuotaLease = domain.QuotaLease
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

// The budget policy, its release settings and the terminal codes are
// domain's vocabulary too.
type (
	Budget        = domain.Budget
	BudgetPolicy  = domain.BudgetPolicy
	Escalation    = domain.Escalation
	BudgetRelease = domain.BudgetRelease
)

// Terminal codes (seed 003; domain). Every run ends with exactly one.
const (
	CodeSuccess          = domain.CodeSuccess
	CodePartialSuccess   = domain.CodePartialSuccess
	CodeImpossible       = domain.CodeImpossible
	CodeMissingInfo      = domain.CodeMissingInfo
	CodeAmbiguousIntent  = domain.CodeAmbiguousIntent
	CodeConfirmRequired  = domain.CodeConfirmRequired
	CodeReviewRequired   = domain.CodeReviewRequired
	CodeBudgetExhausted  = domain.CodeBudgetExhausted
	CodeTimeout          = domain.CodeTimeout
	CodeValidationFail   = domain.CodeValidationFail
	CodeLowConfidence    = domain.CodeLowConfidence
	CodeSourceConflict   = domain.CodeSourceConflict
	CodeRepeatedFailure  = domain.CodeRepeatedFailure
	CodePermissionDenied = domain.CodePermissionDenied
	CodeUnsafeDetection  = domain.CodeUnsafeDetection
	CodeUnavailableDep   = domain.CodeUnavailableDep
	CodeUserCancel       = domain.CodeUserCancel
)

var (
	// TerminalCodes are seed 003's terminal codes.
	TerminalCodes = domain.TerminalCodes
	// ValidCode reports whether code is a terminal code of seed 003.
	ValidCode = domain.ValidCode
	// UsageVector is a model usage as budget dimensions.
	UsageVector = domain.UsageVector
	// LaneShare divides what a run has left among a group's members.
	LaneShare = domain.LaneShare
)

// Over returns the first dimension in which drawing want on top of used
// would pass limits, or "" (domain.Over).
func Over(limits, used, want Vector) Dim { return domain.Over(limits, used, want) }

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
