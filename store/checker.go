package store

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"

	json "github.com/go-json-experiment/json/v1"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/agentbus/agentbus/schema"
)

// reasonPrinter formats reasons exactly as the schema package does.
var reasonPrinter = message.NewPrinter(language.English)

// Reasons worded as the schema package words them for the same failure.
const (
	reasonEmptyID   = "minLength: got 0, want 1"
	reasonWantObj   = "got %s, want object"
	reasonMinimum   = "minimum: got %v, want %v"
	reasonMissingOf = "missing property %s"
)

// token is one step of a location in a document: a property name, or an
// array index when name is "".
type token struct {
	name  string
	index int
}

// field is the token of property name.
func field(name string) token { return token{name: name} }

// item is the token of array index i.
func item(i int) token { return token{index: i} }

// checker collects the violations of a document agentbus builds from its
// own types, at the locations and with the reasons the JSON Schema of its
// index reports them. The checks call it in the order the schema package
// sorts violations (property names in byte order, array items by index,
// a parent before its children), so the first violation is the same. It
// allocates only when it finds a violation.
type checker struct {
	path       [4]token
	depth      int
	violations []schema.Violation
}

// push descends into tok; pop goes back up.
func (c *checker) push(tok token) { c.path[c.depth] = tok; c.depth++ }
func (c *checker) pop()           { c.depth-- }

// fail records a violation at leaf, below the current location.
func (c *checker) fail(leaf token, reason string) {
	var sb strings.Builder
	for _, tok := range append(c.path[:c.depth:c.depth], leaf) {
		sb.WriteByte('/')
		if tok.name == "" {
			sb.WriteString(strconv.Itoa(tok.index))
			continue
		}
		sb.WriteString(strings.ReplaceAll(strings.ReplaceAll(tok.name, "~", "~0"), "/", "~1"))
	}
	c.violations = append(c.violations, schema.Violation{Field: sb.String(), Reason: reason})
}

// id checks a required identifier: {"type": "string", "minLength": 1}.
func (c *checker) id(name, s string) {
	if s == "" {
		c.fail(field(name), reasonEmptyID)
	}
}

// required checks that a property dropped when empty (omitzero) is there.
func (c *checker) required(name string, present bool) {
	if !present {
		c.fail(field(name), fmt.Sprintf(reasonMissingOf, quote(name)))
	}
}

// nonNegative checks {"type": "integer", "minimum": 0}.
func (c *checker) nonNegative(leaf token, n int) {
	c.nonNegative64(leaf, int64(n))
}

// nonNegative64 is nonNegative for an int64 property.
func (c *checker) nonNegative64(leaf token, n int64) {
	if n < 0 {
		c.fail(leaf, reasonPrinter.Sprintf(reasonMinimum, float64(n), 0.0))
	}
}

// nonNegativeNumber checks {"type": "number", "minimum": 0}. A NaN or an
// infinity never gets here: json.Marshal refuses it first.
func (c *checker) nonNegativeNumber(name string, f float64) {
	if f < 0 {
		c.fail(field(name), reasonPrinter.Sprintf(reasonMinimum, f, 0.0))
	}
}

// object checks {"type": "object"} on a json.RawMessage property with
// omitempty: empty is omitted, anything else must be a JSON object. raw is
// valid JSON here, since json.Marshal of the document succeeded.
func (c *checker) object(name string, raw json.RawMessage) {
	if len(raw) == 0 {
		return
	}
	if got := jsonType(raw); got != "object" {
		c.fail(field(name), fmt.Sprintf(reasonWantObj, got))
	}
}

// enum is the "enum" of a string property.
type enum struct {
	values []string
	reason string
}

// newEnum words the violation of values as the schema package does.
func newEnum(values ...string) enum {
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = quote(v)
	}
	return enum{values: values, reason: "value must be one of " + strings.Join(quoted, ", ")}
}

// oneOf checks that s is one of e's values.
func (c *checker) oneOf(name, s string, e enum) {
	if !slices.Contains(e.values, s) {
		c.fail(field(name), e.reason)
	}
}

// err returns the violations found as the *SchemaError of index, or nil.
func (c *checker) err(index string) error {
	if len(c.violations) == 0 {
		return nil
	}
	first := c.violations[0]
	return &SchemaError{Index: index, Field: first.Field, Reason: first.Reason,
		Err: &schema.ValidationError{Violations: c.violations}}
}

// jsonType names the JSON type of a valid JSON value as the schema
// package does ("number" for any number).
func jsonType(raw json.RawMessage) string {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// quote quotes s in single quotes as the schema package does.
func quote(s string) string {
	s = strconv.Quote(s)
	s = strings.ReplaceAll(s, `\"`, `"`)
	s = strings.ReplaceAll(s, `'`, `\'`)
	return "'" + s[1:len(s)-1] + "'"
}
