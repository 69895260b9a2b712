package schema

import (
	"bytes"
	"errors"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// resourceURL is where a compiled document lives; a document's own $id,
// if any, takes precedence as the base of its references.
const resourceURL = "mem://schema.json"

// Validator is a compiled JSON Schema. It is safe for concurrent use.
type Validator struct {
	sch *jsonschema.Schema
}

// Option is an optional compile setting.
type Option func(*options)

type options struct {
	assertFormat bool
}

// AssertFormat makes "format" an assertion rather than an annotation, so
// for example a "date-time" string that is not one fails validation.
func AssertFormat() Option {
	return func(o *options) { o.assertFormat = true }
}

// cacheKey identifies a compiled document: its text and its options.
type cacheKey struct {
	doc string
	options
}

var cache sync.Map // cacheKey → *Validator

// Compile compiles a JSON Schema document. Documents without "$schema"
// are read as draft 2020-12. The result is cached by document text and
// options, so compiling the same schema again is a map lookup. An invalid
// document wraps ErrCompile.
func Compile(doc []byte, opts ...Option) (*Validator, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	key := cacheKey{doc: string(doc), options: o}
	if v, ok := cache.Load(key); ok {
		return v.(*Validator), nil
	}
	v, err := compile(doc, o)
	if err != nil {
		return nil, err
	}
	cache.Store(key, v)
	return v, nil
}

func compile(doc []byte, o options) (*Validator, error) {
	parsed, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCompile, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if o.assertFormat {
		c.AssertFormat()
	}
	if err := c.AddResource(resourceURL, parsed); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCompile, err)
	}
	sch, err := c.Compile(resourceURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCompile, err)
	}
	return &Validator{sch: sch}, nil
}

// Validate checks the JSON instance data. An instance that is not JSON
// wraps ErrNotJSON; one that violates the schema is a *ValidationError.
func (v *Validator) Validate(data []byte) error {
	inst, err := instance(data)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotJSON, err)
	}
	err = v.sch.Validate(inst)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return fmt.Errorf("schema: validate: %w", err)
	}
	return &ValidationError{Violations: violations(verr)}
}

// Validate compiles doc (see Compile) and checks data against it.
func Validate(doc, data []byte) error {
	v, err := Compile(doc)
	if err != nil {
		return err
	}
	return v.Validate(data)
}
