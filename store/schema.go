package store

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

//go:embed schemas/*.json
var schemaFS embed.FS

// schemaBaseURL is the base of the $id of every embedded schema.
const schemaBaseURL = "https://agentbus.dev/schemas/store/"

var reasonPrinter = message.NewPrinter(language.English)

// compiledSchemas compiles every embedded schema exactly once.
var compiledSchemas = sync.OnceValues(func() (map[string]*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	for _, index := range Indexes() {
		raw, err := schemaFS.ReadFile("schemas/" + index + ".json")
		if err != nil {
			return nil, fmt.Errorf("store: read schema %s: %w", index, err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("store: parse schema %s: %w", index, err)
		}
		if err := c.AddResource(schemaBaseURL+index+".json", doc); err != nil {
			return nil, fmt.Errorf("store: add schema %s: %w", index, err)
		}
	}
	out := make(map[string]*jsonschema.Schema, len(Indexes()))
	for _, index := range Indexes() {
		sch, err := c.Compile(schemaBaseURL + index + ".json")
		if err != nil {
			return nil, fmt.Errorf("store: compile schema %s: %w", index, err)
		}
		out[index] = sch
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

// Validate marshals doc to JSON and validates it against the schema of
// index. A violation is returned as *SchemaError naming the first failing
// field; an unknown index wraps ErrUnknownIndex. doc may be any value that
// encodes to a JSON object, including json.RawMessage.
func Validate(index string, doc any) error {
	_, err := Encode(index, doc)
	return err
}

// Encode marshals doc to JSON, validates it against the schema of index
// like Validate, and returns the JSON, so a backend encodes each document
// once.
func Encode(index string, doc any) ([]byte, error) {
	schemas, err := compiledSchemas()
	if err != nil {
		return nil, err
	}
	sch, ok := schemas[index]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownIndex, index)
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, &SchemaError{Index: index, Reason: "document is not JSON-encodable: " + err.Error()}
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, &SchemaError{Index: index, Reason: "document is not valid JSON: " + err.Error()}
	}
	if err := validateInstance(index, sch, inst); err != nil {
		return nil, err
	}
	return raw, nil
}

// validateInstance validates a decoded document, reporting the first
// violation as a *SchemaError.
func validateInstance(index string, sch *jsonschema.Schema, inst any) error {
	err := sch.Validate(inst)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return fmt.Errorf("store: validate %s: %w", index, err)
	}
	return firstViolation(index, verr)
}

// violation is one leaf of a validation error tree.
type violation struct {
	path   []string
	reason string
}

// firstViolation flattens the error tree to its leaves and reports the one
// with the smallest instance location, so the result is deterministic.
func firstViolation(index string, root *jsonschema.ValidationError) *SchemaError {
	var leaves []violation
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, leafViolation(e))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(root)
	if len(leaves) == 0 {
		return &SchemaError{Index: index, Reason: root.Error()}
	}
	first := slices.MinFunc(leaves, func(a, b violation) int { return comparePaths(a.path, b.path) })
	return &SchemaError{Index: index, Field: pointer(first.path), Reason: first.reason}
}

// leafViolation names the field a leaf error is about. For "required" and
// "additionalProperties" the offending property is appended to the
// location, since the instance location is the enclosing object.
func leafViolation(e *jsonschema.ValidationError) violation {
	path := slices.Clone(e.InstanceLocation)
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		if len(k.Missing) > 0 {
			path = append(path, k.Missing[0])
		}
	case *kind.AdditionalProperties:
		if len(k.Properties) > 0 {
			path = append(path, k.Properties[0])
		}
	}
	return violation{path: path, reason: e.ErrorKind.LocalizedString(reasonPrinter)}
}

// comparePaths orders instance locations token by token, comparing array
// indexes numerically; a prefix sorts first.
func comparePaths(a, b []string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] == b[i] {
			continue
		}
		ai, aerr := strconv.Atoi(a[i])
		bi, berr := strconv.Atoi(b[i])
		if aerr == nil && berr == nil {
			return ai - bi
		}
		return strings.Compare(a[i], b[i])
	}
	return len(a) - len(b)
}

// pointer renders path as a JSON Pointer.
func pointer(path []string) string {
	var sb strings.Builder
	for _, tok := range path {
		sb.WriteByte('/')
		tok = strings.ReplaceAll(tok, "~", "~0")
		sb.WriteString(strings.ReplaceAll(tok, "/", "~1"))
	}
	return sb.String()
}
