package handlers

import (
	"errors"

	"github.com/agentbus/agentbus/fault"
	"github.com/agentbus/agentbus/handlers/ledger"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills"
)

// What a hop does with an error it cannot act on itself is decided here,
// once, for every role (docs/ARCHITECTURE.md, "Delivery guarantees"):
//
//   - an error of a kind that ends a run (failureCode) ends it with its
//     code;
//   - any other permanent error (fault.IsPermanent: one a retry cannot
//     change) ends the hop's step, or its run when it has no step, on
//     this delivery, with the error as the reason;
//   - every other error is transient: the hop returns it and the worker
//     redelivers the message with backoff, at most MaxDeliver times.
//     Errors nobody classified are transient, so nothing a retry could
//     do is given up.

// failureCode returns the terminal code an error of a kind that ends the
// run ends it with: VALIDATION_FAIL when structured output stayed invalid
// after its repairs, UNAVAILABLE_DEP when the model provider was
// unavailable after its retries, PERMISSION_DENIED when the Skill Service
// refused the caller, BUDGET_EXHAUSTED when the run's budget refused a
// draw (TIMEOUT when its wall clock ran out). Any other error: "" and
// false.
func failureCode(err error) (string, bool) {
	var ex *ledger.Exhausted
	switch {
	case errors.As(err, &ex) && ex.Dim == orch.DimWallClockS:
		return orch.CodeTimeout, true
	case errors.As(err, &ex):
		return orch.CodeBudgetExhausted, true
	case errors.Is(err, llm.ErrInvalidOutput):
		return orch.CodeValidationFail, true
	case errors.Is(err, llm.ErrUnavailable):
		return orch.CodeUnavailableDep, true
	case errors.Is(err, skills.ErrPermissionDenied):
		return orch.CodePermissionDenied, true
	}
	return "", false
}

// FailureOf is the failure a hop with no step of its own (a route, a
// plan, a synthesis) ends its run with on err: the code of a kind that
// ends runs, with a refused budget draw's evidence; VALIDATION_FAIL for
// any other permanent error, since the same input fails the same way; nil
// for a transient error, which the hop returns to be redelivered.
func FailureOf(err error) *orch.Failure {
	code, ok := failureCode(err)
	if !ok && !fault.IsPermanent(err) {
		return nil
	}
	if !ok {
		code = orch.CodeValidationFail
	}
	f := &orch.Failure{Code: code, Reason: err.Error()}
	var ex *ledger.Exhausted
	if errors.As(err, &ex) {
		f.Evidence = ex.Evidence()
	}
	return f
}

// failureOutcomes are the step outcomes of the failures that end a run
// (failureCode): the decider ends the run with the same code.
var failureOutcomes = map[string]string{
	orch.CodeValidationFail: orch.OutcomeInvalidOutput, orch.CodeUnavailableDep: orch.OutcomeUnavailable,
	orch.CodeBudgetExhausted: orch.OutcomeBudgetExhausted, orch.CodeTimeout: orch.OutcomeTimedOut,
	orch.CodePermissionDenied: orch.OutcomePermissionDenied,
}

// StepFailure is the result a step ends with on err, its reason err's:
// the outcome of a failure that ends the run; for any other permanent
// error, failed, so the run replans around it (or ends, when a replan
// fails the same way); false for a transient error, which the hop
// returns to be redelivered.
func StepFailure(err error) (orch.StepResult, bool) {
	if code, ok := failureCode(err); ok {
		return orch.StepResult{Outcome: failureOutcomes[code], Reason: err.Error()}, true
	}
	if fault.IsPermanent(err) {
		return orch.StepResult{Outcome: orch.OutcomeFailed, Reason: err.Error(),
			Suggestion: "revise the step: it fails the same way however often it is retried"}, true
	}
	return orch.StepResult{}, false
}
