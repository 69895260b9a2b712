package agents

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strings"
)

// Condition operators. The seed's examples use eq, in and contains; the
// others are their negations, prefixes, presence and numeric comparisons.
const (
	// OpEq: the field equals the value (numbers compare by value).
	OpEq = "eq"
	// OpNe: the field is absent or does not equal the value.
	OpNe = "ne"
	// OpIn: the field equals one of the values (an array).
	OpIn = "in"
	// OpNotIn: the field is absent or equals none of the values.
	OpNotIn = "not_in"
	// OpContains: the field, a string, contains the value (a string),
	// ignoring case; or the field, an array, has an element equal to the
	// value.
	OpContains = "contains"
	// OpNotContains: the negation of contains (an absent field included).
	OpNotContains = "not_contains"
	// OpStartsWith: the field, a string, starts with the value, ignoring
	// case.
	OpStartsWith = "starts_with"
	// OpExists: the field is present and not null (value true), or absent
	// or null (value false).
	OpExists = "exists"
	// OpGt, OpGte, OpLt, OpLte compare a numeric field with a number.
	OpGt  = "gt"
	OpGte = "gte"
	OpLt  = "lt"
	OpLte = "lte"
)

// Operators are the condition operators, in documentation order.
var Operators = []string{OpEq, OpNe, OpIn, OpNotIn, OpContains, OpNotContains, OpStartsWith, OpExists, OpGt, OpGte, OpLt, OpLte}

// MaxConditions bounds each of a trigger's condition lists.
const MaxConditions = 32

// maxValues bounds the values of an in or not_in condition.
const maxValues = 256

// fieldRE is a condition's field: a dotted path into the event.
var fieldRE = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}(\.[A-Za-z0-9_]{1,64}){0,7}$`)

// Conditions are a trigger's filter (seed 002): every condition of All
// and at least one of Any must hold; an empty list holds.
type Conditions struct {
	All []Condition `json:"all"`
	Any []Condition `json:"any"`
}

// Condition compares one field of the event with Value. Value is JSON:
// a string, number, boolean, null, or for in and not_in an array.
type Condition struct {
	Field    string `json:"field"`
	Operator string `json:"operator"`
	Value    any    `json:"value"`
}

// Validate checks both lists and returns the first violation.
func (c Conditions) Validate() *Error {
	for _, l := range []struct {
		name string
		list []Condition
	}{{"all", c.All}, {"any", c.Any}} {
		if len(l.list) > MaxConditions {
			return invalid(CodeTooManyConditions, "conditions."+l.name, "at most %d conditions", MaxConditions)
		}
		for i, cond := range l.list {
			if err := cond.validate(fmt.Sprintf("conditions.%s[%d]", l.name, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c Condition) validate(at string) *Error {
	if !fieldRE.MatchString(c.Field) {
		return invalid(CodeInvalidCondition, at+".field", "field must be a dotted path matching %s", fieldRE)
	}
	if !slices.Contains(Operators, c.Operator) {
		return invalid(CodeInvalidOperator, at+".operator", "operator must be one of %s, not %q", strings.Join(Operators, ", "), c.Operator)
	}
	bad := func(want string) *Error {
		return invalid(CodeInvalidCondition, at+".value", "operator %s takes %s", c.Operator, want)
	}
	switch c.Operator {
	case OpEq, OpNe:
		if !scalar(c.Value) {
			return bad("a string, number, boolean or null")
		}
	case OpIn, OpNotIn:
		vs, ok := c.Value.([]any)
		if !ok || len(vs) == 0 || len(vs) > maxValues {
			return bad(fmt.Sprintf("an array of 1 to %d values", maxValues))
		}
		for _, v := range vs {
			if !scalar(v) {
				return bad("an array of strings, numbers, booleans or nulls")
			}
		}
	case OpContains, OpNotContains:
		if !scalar(c.Value) || c.Value == nil {
			return bad("a string, number or boolean")
		}
	case OpStartsWith:
		if s, ok := c.Value.(string); !ok || s == "" {
			return bad("a non-empty string")
		}
	case OpExists:
		if _, ok := c.Value.(bool); !ok {
			return bad("true or false")
		}
	default: // gt, gte, lt, lte
		if _, ok := number(c.Value); !ok {
			return bad("a number")
		}
	}
	return nil
}

// scalar reports whether v is a JSON string, number, boolean or null.
func scalar(v any) bool {
	switch v.(type) {
	case nil, string, bool:
		return true
	}
	_, ok := number(v)
	return ok
}

// number returns v as a finite float64 if it is a number.
func number(v any) (float64, bool) {
	var f float64
	switch n := v.(type) {
	case float64:
		f = n
	case float32:
		f = float64(n)
	case int:
		f = float64(n)
	case int64:
		f = float64(n)
	default:
		return 0, false
	}
	return f, !math.IsNaN(f) && !math.IsInf(f, 0)
}

// Eval reports whether the conditions hold for event, a decoded JSON
// object (nested objects as map[string]any).
func (c Conditions) Eval(event map[string]any) bool {
	failed, _ := c.explain(event)
	return failed == ""
}

// explain returns "" when the conditions hold for event, FailedAll with
// the first condition of All that does not hold, or FailedAny when none
// of Any does.
func (c Conditions) explain(event map[string]any) (string, *Condition) {
	for _, cond := range c.All {
		if !cond.Eval(event) {
			return FailedAll, &cond
		}
	}
	if len(c.Any) == 0 || slices.ContainsFunc(c.Any, func(cond Condition) bool { return cond.Eval(event) }) {
		return "", nil
	}
	return FailedAny, nil
}

// Eval reports whether the condition holds for event. A condition on an
// absent field holds only for the negated operators (ne, not_in,
// not_contains) and exists false.
func (c Condition) Eval(event map[string]any) bool {
	v, present := lookup(event, c.Field)
	switch c.Operator {
	case OpEq:
		return present && equal(v, c.Value)
	case OpNe:
		return !present || !equal(v, c.Value)
	case OpIn:
		return present && in(v, c.Value)
	case OpNotIn:
		return !present || !in(v, c.Value)
	case OpContains:
		return present && contains(v, c.Value)
	case OpNotContains:
		return !present || !contains(v, c.Value)
	case OpStartsWith:
		s, ok := v.(string)
		p, _ := c.Value.(string)
		return present && ok && strings.HasPrefix(strings.ToLower(s), strings.ToLower(p))
	case OpExists:
		want, _ := c.Value.(bool)
		return (present && v != nil) == want
	case OpGt, OpGte, OpLt, OpLte:
		x, ok1 := number(v)
		y, ok2 := number(c.Value)
		if !present || !ok1 || !ok2 {
			return false
		}
		switch c.Operator {
		case OpGt:
			return x > y
		case OpGte:
			return x >= y
		case OpLt:
			return x < y
		}
		return x <= y
	}
	return false
}

// lookup follows a dotted path through nested objects.
func lookup(event map[string]any, path string) (any, bool) {
	var cur any = event
	for part := range strings.SplitSeq(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// equal compares two JSON scalars; numbers by value.
func equal(a, b any) bool {
	if x, ok := number(a); ok {
		y, ok := number(b)
		return ok && x == y
	}
	if _, ok := number(b); ok {
		return false
	}
	switch a.(type) {
	case nil, string, bool:
		return a == b
	}
	return reflect.DeepEqual(a, b)
}

func in(v, values any) bool {
	vs, _ := values.([]any)
	return slices.ContainsFunc(vs, func(x any) bool { return equal(v, x) })
}

func contains(v, want any) bool {
	switch f := v.(type) {
	case string:
		s, ok := want.(string)
		return ok && strings.Contains(strings.ToLower(f), strings.ToLower(s))
	case []any:
		return slices.ContainsFunc(f, func(x any) bool { return equal(x, want) })
	}
	return false
}
