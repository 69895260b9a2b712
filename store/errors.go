package store

import (
	"errors"
	"fmt"

	"github.com/agentbus/agentbus/fault"
)

// Sentinel errors shared by every backend. Backends wrap them with %w;
// callers test with errors.Is. A document that violates its schema, a
// malformed request and an unknown index are permanent (fault.Permanent):
// writing or asking again fails the same way. The others depend on what
// is stored, and every backend error besides them is transient.
var (
	// ErrNotFound reports that the requested document does not exist.
	ErrNotFound = errors.New("store: not found")
	// ErrConflict reports a lost optimistic-concurrency race: the stored
	// version differs from the expected one, or a create found the
	// document already present.
	ErrConflict = errors.New("store: conflict")
	// ErrStale reports a plan projection whose version is not newer than
	// the stored one; the stored projection is kept.
	ErrStale = errors.New("store: stale version")
	// ErrSchema matches every *SchemaError under errors.Is.
	ErrSchema = fault.Permanent(errors.New("store: schema violation"))
	// ErrInvalidArgument reports a malformed request (for example a query
	// without a tenant), as opposed to a malformed document.
	ErrInvalidArgument = fault.Permanent(errors.New("store: invalid argument"))
	// ErrUnknownIndex reports an index name Validate has no schema for.
	ErrUnknownIndex = fault.Permanent(errors.New("store: unknown index"))
)

// SchemaError is the StorageSchemaError: a document that violates the JSON
// Schema of its index. It is returned before the backend is touched, so
// nothing has been written.
type SchemaError struct {
	// Index is the index whose schema was violated.
	Index string
	// Field is the JSON Pointer (RFC 6901) of the first failing field,
	// for example "/steps/0/status"; "" is the document itself.
	Field string
	// Reason is a human-readable description of the violation.
	Reason string
	// Err is the validation error behind the violation (a
	// *schema.ValidationError, when the schema package found it), or nil.
	Err error
}

// Error implements error; the message starts with "store: schema violation".
func (e *SchemaError) Error() string {
	field := e.Field
	if field == "" {
		field = "/"
	}
	return fmt.Sprintf("%s: %s %s: %s", ErrSchema.Error(), e.Index, field, e.Reason)
}

// Is makes errors.Is(err, ErrSchema) true for any *SchemaError, and so
// every test ErrSchema meets (it is permanent).
func (e *SchemaError) Is(target error) bool { return errors.Is(ErrSchema, target) }

// Unwrap returns Err, so errors.Is(err, schema.ErrInvalid) holds too.
func (e *SchemaError) Unwrap() error { return e.Err }
