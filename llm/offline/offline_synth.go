package offline

import (
	"fmt"
	"sort"
	"strings"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/llm"
)

// synthesize renders the last step's output as the answer: a list of
// records becomes numbered lines (by rank when the records carry one).
func synthesize(in llm.SynthInput) string {
	var b strings.Builder
	if in.Persona != nil && in.Persona.Name != "" {
		// The offline model has no style; it opens with the persona's
		// name, so a soul's effect on the answer can be seen.
		fmt.Fprintf(&b, "%s — ", in.Persona.Name)
	}
	last := json.RawMessage(nil)
	if len(in.Outputs) > 0 {
		last = in.Outputs[len(in.Outputs)-1].Value
	}
	if a, ok := asAnswer(last); ok {
		writeAnswer(&b, in.Task, a)
		return strings.TrimRight(b.String(), "\n")
	}
	fmt.Fprintf(&b, "Result for %q:\n", in.Task)
	if len(in.Outputs) == 0 {
		b.WriteString("(no step produced output)\n")
		return b.String()
	}
	if lanes := loopAnswers(in.Outputs); len(lanes) > 1 {
		// Supervisor lanes: every lane's findings, under its goal.
		for i, o := range in.Outputs {
			fmt.Fprintf(&b, "Lane %d — %s:\n", i+1, o.Task)
			writeValue(&b, lanes[i])
		}
		return strings.TrimRight(b.String(), "\n")
	} else if len(lanes) == 1 {
		if a, ok := asAnswer(lanes[0]); ok {
			var ab strings.Builder
			writeAnswer(&ab, in.Task, a)
			return strings.TrimRight(strings.TrimPrefix(b.String(), fmt.Sprintf("Result for %q:\n", in.Task))+ab.String(), "\n")
		}
		writeValue(&b, lanes[0])
		return strings.TrimRight(b.String(), "\n")
	}
	writeValue(&b, in.Outputs[len(in.Outputs)-1].Value)
	return strings.TrimRight(b.String(), "\n")
}

// loopAnswers returns the answers of loop outputs ({"answer": "…"}, the
// answer itself often an observation's JSON), or nil when any output is
// not a loop's.
func loopAnswers(outs []llm.StepOutput) []json.RawMessage {
	var answers []json.RawMessage
	for _, o := range outs {
		var v struct {
			Answer *string `json:"answer"`
		}
		if json.Unmarshal(o.Value, &v) != nil || v.Answer == nil {
			return nil
		}
		answers = append(answers, json.RawMessage(*v.Answer))
	}
	return answers
}

// writeValue renders one output: the fields of an object, a list of
// records as numbered lines; anything else as it is.
func writeValue(b *strings.Builder, value json.RawMessage) {
	var obj map[string]any
	if err := json.Unmarshal(value, &obj); err != nil {
		b.Write(value)
		b.WriteString("\n")
		return
	}
	for _, k := range sortedNames(obj) {
		switch v := obj[k].(type) {
		case []any:
			writeList(b, v)
		default:
			fmt.Fprintf(b, "%s: %s\n", k, scalar(v))
		}
	}
}

// maxListed bounds the records an answer lists; the rest are counted.
const maxListed = 50

func writeList(b *strings.Builder, items []any) {
	recs := make([]map[string]any, 0, len(items))
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			recs = append(recs, m)
		} else {
			recs = append(recs, map[string]any{"value": it})
		}
	}
	if len(recs) > 0 {
		if _, ok := recs[0]["rank"].(float64); ok {
			sort.SliceStable(recs, func(i, j int) bool {
				ri, _ := recs[i]["rank"].(float64)
				rj, _ := recs[j]["rank"].(float64)
				return ri < rj
			})
		}
	}
	for i, r := range recs {
		if i == maxListed {
			fmt.Fprintf(b, "… and %d more\n", len(recs)-maxListed)
			break
		}
		fmt.Fprintf(b, "%d. %s\n", i+1, record(r))
	}
}

// record renders name first, the id in parentheses, then the other fields.
func record(r map[string]any) string {
	var head, id string
	var rest []string
	for _, k := range sortedNames(r) {
		v := scalar(r[k])
		switch {
		case k == "rank":
		case k == "name" || k == "title":
			head = v
		case strings.HasSuffix(k, "_id") || k == "id":
			id = v
		default:
			rest = append(rest, k+" "+v)
		}
	}
	s := head
	if id != "" {
		s = strings.TrimSpace(s + " (" + id + ")")
	}
	if len(rest) > 0 {
		s += " — " + strings.Join(rest, ", ")
	}
	return s
}

func scalar(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return "null"
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

// answer is a query's output (query.apply and its script): what was
// asked, of how many records, under which filter, and what it yields.
type answer struct {
	Question string         `json:"question"`
	Where    string         `json:"where"`
	Count    int            `json:"count"`
	Field    string         `json:"field,omitempty"`
	Values   []any          `json:"values,omitempty"`
	Groups   []answerGroup  `json:"groups,omitempty"`
	Average  *float64       `json:"average,omitempty"`
	Min      *float64       `json:"min,omitempty"`
	Max      *float64       `json:"max,omitempty"`
	rest     map[string]any // the records, under their list's name
}

type answerGroup struct {
	Value any `json:"value"`
	Count int `json:"count"`
}

// asAnswer decodes a query's output; ok is false for any other value.
func asAnswer(v json.RawMessage) (answer, bool) {
	var out struct {
		Summary []answer `json:"summary"`
	}
	var all map[string]any
	if len(v) == 0 || json.Unmarshal(v, &all) != nil || json.Unmarshal(v, &out) != nil || len(out.Summary) != 1 {
		return answer{}, false
	}
	sum, _ := all[summaryField].([]any)
	fields, _ := sum[0].(map[string]any)
	for _, k := range []string{"question", "where", "count"} {
		if _, ok := fields[k]; !ok {
			return answer{}, false
		}
	}
	a := out.Summary[0]
	a.rest = map[string]any{}
	for k, x := range all {
		if _, isList := x.([]any); isList && k != summaryField {
			a.rest[k] = x
		}
	}
	return a, true
}

// writeAnswer renders a query's output: a header naming what was asked
// and the filter, then the figure, the values or the records.
func writeAnswer(b *strings.Builder, task string, a answer) {
	var about []string
	if a.Question != "" {
		about = append(about, a.Question)
	}
	if a.Where != "" {
		about = append(about, "where "+a.Where)
	}
	listed := 0
	for _, k := range sortedNames(a.rest) {
		listed += len(a.rest[k].([]any))
	}
	header := fmt.Sprintf("Result for %q", task)
	if len(about) > 0 {
		header += " — " + strings.Join(about, ", ")
	}
	if len(a.rest) > 0 && a.Count != listed {
		header += fmt.Sprintf(" (%d in all)", a.Count)
	}
	fmt.Fprintf(b, "%s:\n", header)
	switch {
	case a.Values != nil:
		vals := make([]string, len(a.Values))
		for i, v := range a.Values {
			vals[i] = scalar(v)
		}
		fmt.Fprintf(b, "%s (%d): %s\n", a.Field, len(vals), strings.Join(vals, ", "))
	case a.Groups != nil:
		for _, g := range a.Groups {
			fmt.Fprintf(b, "%s: %d\n", scalar(g.Value), g.Count)
		}
	case a.Average != nil:
		fmt.Fprintf(b, "average %s: %s (over %d)\n", a.Field, scalar(*a.Average), a.Count)
	case a.Min != nil && a.Max != nil:
		fmt.Fprintf(b, "%s: from %s to %s (over %d)\n", a.Field, scalar(*a.Min), scalar(*a.Max), a.Count)
	case len(a.rest) > 0:
		for _, k := range sortedNames(a.rest) {
			writeList(b, a.rest[k].([]any))
		}
		if listed == 0 {
			b.WriteString("(none)\n")
		}
	default:
		fmt.Fprintf(b, "count: %d\n", a.Count)
	}
}
