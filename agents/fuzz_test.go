package agents

import (
	"testing"

	json "github.com/go-json-experiment/json/v1"
)

// negations pairs each operator with the one that holds exactly when it
// does not.
var negations = map[string]string{OpEq: OpNe, OpIn: OpNotIn, OpContains: OpNotContains}

// FuzzConditions: a trigger's conditions come from a tenant, the events
// they filter from anyone who can post to /agent/events. Whatever both
// hold, validation answers with a coded error or accepts, evaluation of
// accepted conditions never panics, and each operator and its negation
// disagree on every event.
func FuzzConditions(f *testing.F) {
	f.Add([]byte(seedConditions), []byte(`{"channel":{"platform":"facebook"},"conversation":{"status":"open"},"message":{"text":"I need help"}}`))
	f.Add([]byte(`{"all":[{"field":"a.b","operator":"gt","value":1e308}]}`), []byte(`{"a":{"b":"x"}}`))
	f.Add([]byte(`{"any":[{"field":"n","operator":"contains","value":1}]}`), []byte(`{"n":[1,"1",true,null]}`))
	f.Add([]byte(`{"all":[{"field":"x","operator":"exists","value":false}]}`), []byte(`{"x":null}`))
	f.Add([]byte(`{"all":[{"field":"t","operator":"starts_with","value":"İ"}]}`), []byte(`{"t":"i̇stanbul"}`))
	f.Fuzz(func(t *testing.T, condJSON, eventJSON []byte) {
		var c Conditions
		if json.Unmarshal(condJSON, &c) != nil {
			return
		}
		if err := c.Validate(); err != nil {
			if err.Code == "" || err.Field == "" {
				t.Fatalf("a refusal without its code or field: %+v", err)
			}
			return
		}
		var ev map[string]any
		if json.Unmarshal(eventJSON, &ev) != nil {
			return
		}
		c.Eval(ev)
		for _, cond := range append(c.All, c.Any...) {
			neg, ok := negations[cond.Operator]
			if !ok {
				continue
			}
			other := cond
			other.Operator = neg
			if cond.Eval(ev) == other.Eval(ev) {
				t.Fatalf("%s and %s agree (%v) on %s for %s", cond.Operator, neg, cond.Eval(ev), cond.Field, eventJSON)
			}
		}
	})
}
