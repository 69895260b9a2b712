package handlers_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/ledger"
	"github.com/agentbus/agentbus/kvcas"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/sandbox"
	"github.com/agentbus/agentbus/schema"
	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/store"
)

// TestFailures_EachErrorHasOneSide: what a step, a route or a plan ends
// with on each class of error, and which errors stay transient (the hop
// returns them and the message is redelivered).
func TestFailures_EachErrorHasOneSide(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("handlers: act: %w", err) }
	for _, tc := range []struct {
		name        string
		err         error
		outcome     string // the step's; "" for a transient error
		code        string // a route's or a plan's
		transientOK bool
	}{
		{"structured output invalid after its repairs", wrap(fmt.Errorf("%w after 2 repairs", llm.ErrInvalidOutput)),
			orch.OutcomeInvalidOutput, orch.CodeValidationFail, false},
		{"provider unavailable after its retries", wrap(fmt.Errorf("openai: %w: 503", llm.ErrUnavailable)),
			orch.OutcomeUnavailable, orch.CodeUnavailableDep, false},
		{"a refused budget draw", wrap(&ledger.Exhausted{Dim: orch.DimModelCalls}), orch.OutcomeBudgetExhausted, orch.CodeBudgetExhausted, false},
		{"the wall clock", wrap(&ledger.Exhausted{Dim: orch.DimWallClockS}), orch.OutcomeTimedOut, orch.CodeTimeout, false},
		{"a refused caller", fmt.Errorf("handlers: load_skill x: %w", skills.ErrPermissionDenied),
			orch.OutcomePermissionDenied, orch.CodePermissionDenied, false},
		{"a return_spec not derivable", fmt.Errorf("handlers: extraction script: offline: %w", schema.ErrNotDerivable),
			orch.OutcomeFailed, orch.CodeValidationFail, false},
		{"a value failing its schema", &schema.ValidationError{Violations: []schema.Violation{{Field: "/id", Reason: "missing"}}},
			orch.OutcomeFailed, orch.CodeValidationFail, false},
		{"a schema that does not compile", fmt.Errorf("%w: bad", schema.ErrCompile), orch.OutcomeFailed, orch.CodeValidationFail, false},
		{"arguments the skill rejects", fmt.Errorf("skills: call: %w", skills.ErrInvalidArguments), orch.OutcomeFailed, orch.CodeValidationFail, false},
		{"an unknown skill", fmt.Errorf("skills: %w", skills.ErrSkillNotFound), orch.OutcomeFailed, orch.CodeValidationFail, false},
		{"a result breaking its contract", skills.ErrBrokenContract, orch.OutcomeFailed, orch.CodeValidationFail, false},
		{"a document the store refuses", &store.SchemaError{Index: "agent_memory", Reason: "x"}, orch.OutcomeFailed, orch.CodeValidationFail, false},
		{"a corrupt KV entry", kvcas.ErrCorrupt, orch.OutcomeFailed, orch.CodeValidationFail, false},
		{"an invalid sandbox script", sandbox.ErrInvalidScript, orch.OutcomeFailed, orch.CodeValidationFail, false},
		{"a request that does not fit its task", llm.ErrBadInput, orch.OutcomeFailed, orch.CodeValidationFail, false},

		{"an unclassified error", errors.New("EOF"), "", "", true},
		{"a transport error", fmt.Errorf("skills: call: %w", errors.New("dial tcp: connection refused")), "", "", true},
		{"a call that did not reach the skill", fmt.Errorf("%w: config read", skills.ErrNotCalled), "", "", true},
		{"a sandbox that cannot start", fmt.Errorf("handlers: sandbox: %w", sandbox.ErrSetup), "", "", true},
		{"a lost KV race", kvcas.ErrContended, "", "", true},
		{"an unreadable Skill Service answer", fmt.Errorf("%w: truncated", skills.ErrInvalidResponse), "", "", true},
		{"a publish not acknowledged", events.ErrPublish, "", "", true},
		{"a hop whose deadline passed", fmt.Errorf("offline: %w", errors.Join(schema.ErrNotDerivable, context.DeadlineExceeded)),
			"", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, ok := handlers.StepFailure(tc.err)
			if ok == tc.transientOK || res.Outcome != tc.outcome {
				t.Errorf("StepFailure = %q, %v; want %q", res.Outcome, ok, tc.outcome)
			}
			if ok && res.Reason != tc.err.Error() {
				t.Errorf("reason %q, want the error's %q", res.Reason, tc.err.Error())
			}
			f := handlers.FailureOf(tc.err)
			switch {
			case tc.transientOK && f != nil:
				t.Errorf("FailureOf = %+v, want nil: the message is redelivered", f)
			case !tc.transientOK && (f == nil || f.Code != tc.code || f.Reason != tc.err.Error()):
				t.Errorf("FailureOf = %+v, want %s with the error as its reason", f, tc.code)
			}
			// What reaches the runtime unhandled: the deterministic
			// errors are dead-lettered at once; an unavailable provider
			// and a refused draw end runs but are not themselves marked.
			endsByCode := tc.outcome == orch.OutcomeUnavailable || tc.outcome == orch.OutcomeBudgetExhausted ||
				tc.outcome == orch.OutcomeTimedOut
			if want := !tc.transientOK && !endsByCode; events.IsPermanent(tc.err) != want {
				t.Errorf("events.IsPermanent = %v, want %v", !want, want)
			}
		})
	}
}
