package schema

import (
	"errors"
	"strings"

	"github.com/agentbus/agentbus/fault"
)

// Sentinel errors; callers test with errors.Is. Each is permanent
// (fault.Permanent): the same schema and the same instance give the same
// answer, so no retry can change it.
var (
	// ErrCompile reports a schema document that is not JSON or not a valid
	// JSON Schema.
	ErrCompile = fault.Permanent(errors.New("schema: cannot compile"))
	// ErrNotJSON reports an instance that is not JSON.
	ErrNotJSON = fault.Permanent(errors.New("schema: not JSON"))
	// ErrInvalid matches every *ValidationError under errors.Is.
	ErrInvalid = fault.Permanent(errors.New("schema: validation failed"))
	// ErrNotDerivable marks a return_spec shape that a skill's output
	// schema cannot satisfy.
	ErrNotDerivable = fault.Permanent(errors.New("schema: shape not derivable from output schema"))
)

// Violation is one failing location of an instance.
type Violation struct {
	// Field is the JSON Pointer (RFC 6901) of the failing value, for
	// example "/steps/0/status"; "" is the instance itself. For a missing
	// or unexpected property it names that property.
	Field string
	// Reason is a human-readable description of the violation.
	Reason string
}

// ValidationError is an instance that does not validate against its
// schema.
type ValidationError struct {
	// Violations lists every failing location once, ordered by location
	// (array indexes numerically, a parent before its children), so the
	// first is deterministic. It is never empty.
	Violations []Violation
}

// Error implements error: "schema: validation failed at /status: …",
// followed by the other violations, separated by semicolons.
func (e *ValidationError) Error() string {
	var sb strings.Builder
	sb.WriteString(ErrInvalid.Error())
	for i, v := range e.Violations {
		if i > 0 {
			sb.WriteByte(';')
		}
		field := v.Field
		if field == "" {
			field = "/"
		}
		sb.WriteString(" at ")
		sb.WriteString(field)
		sb.WriteString(": ")
		sb.WriteString(v.Reason)
	}
	return sb.String()
}

// Is makes errors.Is(err, ErrInvalid) true for any *ValidationError, and
// so every test ErrInvalid meets (it is permanent).
func (e *ValidationError) Is(target error) bool { return errors.Is(ErrInvalid, target) }
