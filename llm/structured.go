package llm

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/schema"
)

// MaxRepairs is how many times Structured asks the model to fix an answer
// that does not validate.
const MaxRepairs = 2

// Structured calls the model for a JSON answer that validates against
// req.Schema and decodes it into out. An invalid answer is sent back with
// the validation error, at most MaxRepairs times; then ErrInvalidOutput.
// Usage is summed over every attempt.
func Structured(ctx context.Context, m Model, req Request, out any) (Usage, error) {
	return StructuredCheck(ctx, m, req, out, nil)
}

// StructuredCheck is Structured with a further check of the decoded
// answer (for example a plan's verification against the skills' schemas):
// an answer check rejects is repaired like one that fails its schema.
func StructuredCheck(ctx context.Context, m Model, req Request, out any, check func() error) (Usage, error) {
	var total Usage
	for attempt := 0; ; attempt++ {
		resp, err := m.Complete(ctx, req)
		if err != nil {
			return total, err
		}
		total = total.Add(resp.Usage)
		text := ExtractJSON(resp.Message.Content)
		verr := schema.Validate(req.Schema, []byte(text))
		if verr == nil {
			reflect.ValueOf(out).Elem().SetZero() // nothing of a rejected answer survives
			verr = json.Unmarshal([]byte(text), out)
		}
		if verr == nil && check != nil {
			verr = check()
		}
		if verr == nil {
			return total, nil
		}
		if attempt == MaxRepairs {
			return total, fmt.Errorf("%w after %d repairs: %v", ErrInvalidOutput, MaxRepairs, verr)
		}
		req.Repair = true
		req.Messages = append(append([]Message(nil), req.Messages...),
			Message{Role: RoleAssistant, Content: resp.Message.Content},
			Message{Role: RoleUser, Content: "Your answer was rejected: " + verr.Error() + ". Answer again with corrected JSON only."})
	}
}

// ExtractJSON strips a Markdown code fence around a JSON answer.
func ExtractJSON(s string) string {
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(s, "```"); ok {
		rest = strings.TrimPrefix(rest, "json")
		if i := strings.LastIndex(rest, "```"); i >= 0 {
			rest = rest[:i]
		}
		return strings.TrimSpace(rest)
	}
	return s
}
