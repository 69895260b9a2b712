package offline

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agentbus/agentbus/schema"
	"github.com/agentbus/agentbus/text"
)

// query is an intent resolved against the output of the skill that
// answers it: which list of records it reads, which fields it keeps,
// which number field it sorts, bounds or averages (Metric) and which
// field its distinct values or groups are of (Subject). The records a
// task names by value ("in Melbourne", "Harbour Front") are found at run
// time, in the data: see mentioned. The planner derives the step's
// return_spec from it (shape), the executor computes it over a small
// response (apply) and the extraction script over a large one (python).
type query struct {
	intent
	Array   string   // the output field that holds the records
	Noun    string   // what one record is: "outlet", "item"
	Fields  []string // every record field, sorted
	Keep    []string // the fields an answer's records keep
	Metric  string   // the number field, "" if none
	Subject string   // the field of distinct and group, "" if none
	Match   []string // the fields whose values a task may name
	Narrow  bool     // the task named the fields: every record, those fields
	item    schema.Shape
	kind    map[string]string // field → id, name, text, number, label, labels
}

// maxRecords bounds the records an answer carries at each extraction
// attempt; a narrow answer ("every item id with its category") carries
// all of them at first. The last attempt carries none.
var maxRecords = []int{50, 10, 0}

// textFields hold long free text: never kept or matched unless named.
var textFields = map[string]bool{"description": true, "text": true, "content": true, "body": true, "summary": true,
	"notes": true, "details": true}

// newQuery resolves task against the output shape out, or returns nil
// when out holds no list of records.
func newQuery(task string, out schema.Shape) *query {
	if out.Properties["text"].Type == "string" {
		return nil // a text answer (a plain MCP tool's): the text is it
	}
	in := parseIntent(userTask(task))
	q := &query{intent: in, kind: map[string]string{}}
	best := -1
	for _, name := range sortedNames(out.Properties) {
		p := out.Properties[name]
		if p.Type != "array" || p.Items == nil || p.Items.Type != "object" || len(p.Items.Properties) == 0 {
			continue
		}
		// The list whose name or fields the task names most.
		score := 0
		for _, f := range append(sortedNames(p.Items.Properties), name) {
			if containsSeq(in.terms, text.Terms(f, nil)) {
				score++
			}
		}
		if score > best {
			best, q.Array, q.item = score, name, *p.Items
		}
	}
	if best < 0 {
		return nil
	}
	q.Noun = schema.Singular(q.Array)
	q.Fields = sortedNames(q.item.Properties)
	for _, f := range q.Fields {
		q.kind[f] = fieldKind(f, q.item.Properties[f])
		if q.kind[f] == "id" && f != "id" && strings.HasSuffix(f, "_id") {
			q.Noun = strings.TrimSuffix(f, "_id")
		}
	}
	q.resolve()
	return q
}

// fieldKind classifies a record field.
func fieldKind(name string, s schema.Shape) string {
	switch {
	case name == "id" || strings.HasSuffix(name, "_id"):
		return "id"
	case name == "name" || name == "title":
		return "name"
	case textFields[name]:
		return "text"
	case s.Type == "number" || s.Type == "integer":
		return "number"
	case s.Type == "string":
		return "label"
	case s.Type == "array" && s.Items != nil && s.Items.Type == "string":
		return "labels"
	}
	return "other"
}

// resolve picks the metric, the subject, the fields kept and matched.
func (q *query) resolve() {
	named := func(f string) bool { return containsSeq(q.terms, text.Terms(f, nil)) }
	var numbers []string
	subjectAt := -1
	for _, f := range q.Fields {
		switch q.kind[f] {
		case "number":
			if named(f) {
				q.Metric = f
			}
			if f != "rank" {
				numbers = append(numbers, f)
			}
		case "label", "labels":
			if at := indexSeq(q.terms, text.Terms(f, nil)); at >= 0 && (subjectAt < 0 || at < subjectAt) {
				q.Subject, subjectAt = f, at
			}
		}
		if k := q.kind[f]; k == "id" || k == "name" || k == "label" || k == "labels" {
			q.Match = append(q.Match, f)
		}
	}
	if q.Metric == "" && len(numbers) == 1 {
		q.Metric = numbers[0]
	}
	if q.Subject != "" {
		// "which cities … outlets" asks for cities; "the outlets … and
		// their status" for outlets; "item categories" for categories.
		noun := indexSeq(q.terms, text.Terms(q.Noun, nil))
		if noun >= 0 && noun < subjectAt-1 {
			q.Subject = ""
		}
	}
	switch {
	case (q.op == opList || q.op == opCount) && q.Subject != "" && !q.sorted:
		q.op = opDistinct // "how many cities": the number of distinct ones
	case q.op == opGroup && q.Subject == "":
		q.op = opCount
	case (q.op == opAverage || q.op == opRange) && q.Metric == "":
		q.op = opList
	}
	if q.Metric == "" {
		q.sorted, q.bounds = false, nil
	}
	var namedFields []string
	for _, f := range q.Fields {
		if named(f) {
			namedFields = append(namedFields, f)
		}
	}
	if q.op == opList && !q.sorted && len(q.bounds) == 0 && len(namedFields) >= 2 {
		q.Narrow, q.Keep = true, namedFields
		return
	}
	for _, f := range q.Fields {
		if k := q.kind[f]; k != "text" && k != "other" || named(f) {
			q.Keep = append(q.Keep, f)
		}
	}
}

// essential are the fields an answer's records keep when they must be
// few: the ids, the name, the metric and the subject.
func (q *query) essential() []string {
	var out []string
	for _, f := range q.Keep {
		if k := q.kind[f]; k == "id" || k == "name" || f == q.Metric || f == q.Subject {
			out = append(out, f)
		}
	}
	return out
}

// question names what the answer holds, without its filter.
func (q *query) question() string {
	noun := q.Noun + "s"
	dir := map[bool]string{true: "highest", false: "lowest"}[q.desc]
	switch q.op {
	case opCount:
		return "the number of " + noun
	case opDistinct:
		return "the distinct values of " + q.Subject
	case opGroup:
		return "the number of " + noun + " per " + q.Subject
	case opAverage:
		return fmt.Sprintf("the average %s of %s", q.Metric, noun)
	case opRange:
		return fmt.Sprintf("the range of %s of %s", q.Metric, noun)
	}
	switch {
	case q.n == 1 && q.sorted:
		return fmt.Sprintf("the %s with the %s %s", q.Noun, dir, q.Metric)
	case q.n > 1 && q.sorted:
		return fmt.Sprintf("the %d %s with the %s %s", q.n, noun, dir, q.Metric)
	case q.n > 0:
		return fmt.Sprintf("the first %d %s", q.n, noun)
	}
	return ""
}

// shape is the return_spec of the step that answers the query. A
// planned return_spec must derive from the skill's output (the planner's
// verification), so the answer is a summary, a one-element list of
// records of no declared field (derivable from any list), holding the
// question, the filter applied, the count and what the operation yields;
// and, for a list, the records with the fields kept.
func (q *query) shape() schema.Shape {
	s := schema.Shape{Type: "object", Required: []string{summaryField}, Properties: map[string]schema.Shape{
		summaryField: {Type: "array", Items: &schema.Shape{Type: "object"}}}}
	if q.op == opList {
		item := schema.Shape{Type: "object", Properties: map[string]schema.Shape{}}
		for _, f := range q.Keep {
			item.Properties[f] = q.item.Properties[f]
		}
		s.Properties[q.Array] = schema.Shape{Type: "array", Items: &item}
	}
	return s
}

// summaryField holds a query's answer in its output.
const summaryField = "summary"

// isQueryShape reports a return_spec shape made by query.shape.
func isQueryShape(s schema.Shape) bool {
	sum, ok := s.Properties[summaryField]
	return ok && sum.Type == "array" && sum.Items != nil && sum.Items.Type == "object" && len(sum.Items.Properties) == 0
}

// containsSeq reports whether seq occurs, contiguous, in terms.
func containsSeq(terms, seq []string) bool { return indexSeq(terms, seq) >= 0 }

// indexSeq is where seq first occurs, contiguous, in terms, or -1.
func indexSeq(terms, seq []string) int {
	if len(seq) == 0 {
		return -1
	}
	for i := 0; i+len(seq) <= len(terms); i++ {
		if slices.Equal(terms[i:i+len(seq)], seq) {
			return i
		}
	}
	return -1
}
