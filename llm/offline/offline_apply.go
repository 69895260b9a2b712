package offline

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/agentbus/agentbus/text"
)

// maxValueTerms bounds the words of a value a task may name: longer
// values are prose, not labels.
const maxValueTerms = 4

// apply computes the query over a skill's output, as its extraction
// script does over a large one: the records the task names (mentioned),
// within its bounds, then the operation. level narrows the records
// carried (maxRecords).
func (q *query) apply(data map[string]any, level int) map[string]any {
	var rows []map[string]any
	if arr, ok := data[q.Array].([]any); ok {
		for _, el := range arr {
			if r, ok := el.(map[string]any); ok {
				rows = append(rows, r)
			}
		}
	}
	filters := q.mentioned(rows)
	var where []string
	for _, f := range sortedNames(filters) {
		where = append(where, f+" is "+strings.Join(filters[f], " or "))
	}
	for _, b := range q.bounds {
		where = append(where, fmt.Sprintf("%s %s %s", q.Metric, b.Op, scalar(b.Value)))
	}
	rows = q.filter(rows, filters)
	out := map[string]any{"count": len(rows), "where": strings.Join(where, " and "), "question": q.question()}
	result := map[string]any{summaryField: []any{out}}
	switch q.op {
	case opList:
		result[q.Array] = q.records(rows, level)
	case opCount:
	case opDistinct:
		var values []any
		seen := map[string]bool{}
		for _, r := range rows {
			for _, v := range labels(r[q.Subject]) {
				if !seen[v] {
					seen[v] = true
					values = append(values, v)
				}
			}
		}
		out["field"], out["values"], out["count"] = q.Subject, values, len(values)
	case opGroup:
		counts, order := map[string]int{}, []string{}
		for _, r := range rows {
			for _, v := range labels(r[q.Subject]) {
				if counts[v] == 0 {
					order = append(order, v)
				}
				counts[v]++
			}
		}
		groups := make([]any, 0, len(order))
		for _, v := range order {
			groups = append(groups, map[string]any{"value": v, "count": counts[v]})
		}
		out["field"], out["groups"] = q.Subject, groups
	case opAverage, opRange:
		out["field"] = q.Metric
		var nums []float64
		for _, r := range rows {
			if v, ok := r[q.Metric].(float64); ok {
				nums = append(nums, v)
			}
		}
		if len(nums) == 0 {
			break
		}
		sum, lo, hi := 0.0, nums[0], nums[0]
		for _, v := range nums {
			sum, lo, hi = sum+v, math.Min(lo, v), math.Max(hi, v)
		}
		if q.op == opAverage {
			out["average"] = math.Round(sum/float64(len(nums))*100) / 100
		} else {
			out["min"], out["max"] = lo, hi
		}
	}
	return result
}

// records sorts rows by the metric when asked, cuts them to n and to the
// level's cap, and keeps the query's fields.
func (q *query) records(rows []map[string]any, level int) []any {
	if q.sorted {
		sort.SliceStable(rows, func(i, j int) bool {
			a, _ := rows[i][q.Metric].(float64)
			b, _ := rows[j][q.Metric].(float64)
			if q.desc {
				return a > b
			}
			return a < b
		})
	}
	keep, limit := q.Keep, maxRecords[min(level, len(maxRecords)-1)]
	if q.Narrow && level == 0 {
		limit = len(rows)
	}
	if level > 0 {
		keep = q.essential()
	}
	if q.n > 0 {
		limit = min(limit, q.n)
	}
	out := make([]any, 0, min(limit, len(rows)))
	for _, r := range rows[:min(limit, len(rows))] {
		kept := map[string]any{}
		for _, f := range keep {
			if v, ok := r[f]; ok {
				kept[f] = v
			}
		}
		out = append(out, kept)
	}
	return out
}

// mentioned finds the values the task names, field by field: a value
// (of a label, a name or an id, at most maxValueTerms words) whose words
// occur in the task's, in order. A field whose values the task names
// filters the records to those values.
func (q *query) mentioned(rows []map[string]any) map[string][]string {
	out := map[string][]string{}
	for _, f := range q.Match {
		seen := map[string]bool{}
		for _, r := range rows {
			for _, v := range labels(r[f]) {
				if seen[v] {
					continue
				}
				seen[v] = true
				if t := text.Terms(v, nil); len(t) <= maxValueTerms && containsSeq(q.terms, t) {
					out[f] = append(out[f], v)
				}
			}
		}
	}
	return out
}

// filter keeps the rows with a named value in every filtered field and
// within every bound.
func (q *query) filter(rows []map[string]any, filters map[string][]string) []map[string]any {
	var out []map[string]any
	for _, r := range rows {
		ok := true
		for f, want := range filters {
			ok = ok && anyIn(labels(r[f]), want)
		}
		for _, b := range q.bounds {
			v, isNum := r[q.Metric].(float64)
			ok = ok && isNum && b.holds(v)
		}
		if ok {
			out = append(out, r)
		}
	}
	return out
}

func (b bound) holds(v float64) bool {
	switch b.Op {
	case ">":
		return v > b.Value
	case ">=":
		return v >= b.Value
	case "<":
		return v < b.Value
	}
	return v <= b.Value
}

// labels are a field's string values: the string, or the strings of an
// array.
func labels(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, el := range x {
			if s, ok := el.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func anyIn(have, want []string) bool {
	for _, h := range have {
		for _, w := range want {
			if h == w {
				return true
			}
		}
	}
	return false
}
