// Package schema is agentbus's one home for JSON Schema.
//
// Compile turns a JSON Schema document (draft 2020-12 unless it says
// otherwise) into a Validator, caching the result by document text, so the
// hot paths (every model answer, every tool call, every step output) compile
// each schema once. Validator.Validate checks a JSON instance and reports a
// violation as *ValidationError, which lists every failing location as a
// JSON Pointer, smallest location first, and matches ErrInvalid under
// errors.Is. Validate is Compile followed by Validator.Validate.
//
// Shape is the subset of JSON Schema agentbus reasons about when it chains
// skills and checks return_specs: type, properties, items, required and
// enum. ParseShape reads one from a schema document; Derive says how each
// field of a return_spec shape is taken from a skill's output schema,
// Apply evaluates such derivations on a decoded output, and JQ and Python
// render them as the extraction scripts the executor runs in its sandbox.
//
// The package never logs; errors wrap the sentinels declared in errors.go.
package schema
