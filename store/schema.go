package store

import (
	"embed"
	"errors"
	"fmt"
	"sync"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/schema"
)

//go:embed schemas/*.json
var schemaFS embed.FS

// compiledSchemas compiles every embedded schema exactly once, with
// "format" asserted (a date-time must be one).
var compiledSchemas = sync.OnceValues(func() (map[string]*schema.Validator, error) {
	out := make(map[string]*schema.Validator, len(Indexes()))
	for _, index := range Indexes() {
		raw, err := schemaFS.ReadFile("schemas/" + index + ".json")
		if err != nil {
			return nil, fmt.Errorf("store: read schema %s: %w", index, err)
		}
		v, err := schema.Compile(raw, schema.AssertFormat())
		if err != nil {
			return nil, fmt.Errorf("store: schema %s: %w", index, err)
		}
		out[index] = v
	}
	return out, nil
})

// SchemaJSON returns the raw JSON Schema (draft 2020-12) of index, for
// backends or tools that want to publish it. The result is a copy.
func SchemaJSON(index string) ([]byte, error) {
	raw, err := schemaFS.ReadFile("schemas/" + index + ".json")
	if err != nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownIndex, index)
	}
	return raw, nil
}

// Validate checks doc against the schema of index, with the verdict
// Encode gives, without keeping the JSON. A violation is returned as
// *SchemaError naming the first failing field; an unknown index wraps
// ErrUnknownIndex. doc may be any value that encodes to a JSON object,
// including json.RawMessage. A Memory, Plan, Event, Soul or Session value
// checked for its own index is not encoded at all: it is checked in Go,
// json.Marshal's refusals included (encodable); any other value is
// encoded and validated against the JSON Schema.
func Validate(index string, doc any) error {
	if typed := typedIndex(doc); typed == "" || typed != index {
		_, err := encodeWithSchema(index, doc)
		return err
	}
	if err := encodable(doc); err != nil {
		return notEncodable(index, err)
	}
	var c checker
	c.check(doc)
	return c.err(index)
}

// Encode marshals doc to JSON, validates it against the schema of index
// like Validate, and returns the JSON, so a backend encodes each document
// once. A Memory, Plan, Event, Soul or Session value written to its own
// index is checked in Go, with the verdict and the *SchemaError its JSON
// Schema would give; any other value (json.RawMessage, a map, a pointer) is
// validated against the JSON Schema.
func Encode(index string, doc any) ([]byte, error) {
	if typed := typedIndex(doc); typed == "" || typed != index {
		return encodeWithSchema(index, doc)
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, notEncodable(index, err)
	}
	var c checker
	c.check(doc)
	if err := c.err(index); err != nil {
		return nil, err
	}
	return raw, nil
}

// encodeWithSchema is Encode through the JSON Schema of index.
func encodeWithSchema(index string, doc any) ([]byte, error) {
	schemas, err := compiledSchemas()
	if err != nil {
		return nil, err
	}
	v, ok := schemas[index]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownIndex, index)
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, notEncodable(index, err)
	}
	if err := v.Validate(raw); err != nil {
		return nil, schemaError(index, err)
	}
	return raw, nil
}

// notEncodable reports a document json.Marshal refuses.
func notEncodable(index string, err error) error {
	return &SchemaError{Index: index, Reason: "document is not JSON-encodable: " + err.Error()}
}

// schemaError reports a failed validation as a *SchemaError naming the
// first violation, wrapping the schema package's error.
func schemaError(index string, err error) error {
	var verr *schema.ValidationError
	switch {
	case errors.As(err, &verr):
		first := verr.Violations[0]
		return &SchemaError{Index: index, Field: first.Field, Reason: first.Reason, Err: err}
	case errors.Is(err, schema.ErrNotJSON):
		return &SchemaError{Index: index, Reason: "document is not valid JSON: " + err.Error(), Err: err}
	}
	return fmt.Errorf("store: validate %s: %w", index, err)
}
