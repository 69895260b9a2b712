package offline

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/schema"
	"github.com/agentbus/agentbus/text"
)

type planSkill struct {
	info      llm.SkillInfo
	in, out   schema.Shape
	relevance float64
}

// plan chains skills: it ranks the allowed skills for the task
// (rankSkills), takes the most relevant one whose inputs the task or
// another skill can provide, adds the skills that answer words of the
// task it lacks, then the producers their required inputs need (an
// output that derives the input), orders producers first and derives each
// step's return_spec from what its consumers need, or, for a final step,
// from the question the task asks of its output (query).
func plan(in llm.PlanInput) llm.PlanOutput {
	if in.Failed != nil && len(in.Remaining) > 0 {
		return replan(in)
	}
	r := rankSkills(in.Task, in.Skills)
	p := planner{task: in.Task, cands: r.cands, index: map[string]int{}, needs: map[string][]need{}}
	var chosen []*planSkill
	var reasons []string
	for _, c := range r.cands {
		if c.relevance == 0 {
			break
		}
		if len(chosen) > 0 && (c.relevance < companionShare*chosen[0].relevance || !r.adds(c, chosen)) {
			continue
		}
		if err := p.try(c); err != nil {
			reasons = append(reasons, err.Error())
			continue
		}
		chosen = append(chosen, c)
	}
	if len(chosen) == 0 {
		return llm.PlanOutput{Infeasible: r.infeasible(reasons)}
	}
	max := in.MaxSteps
	if max <= 0 || max > 10 {
		max = 10
	}
	if len(p.order) > max {
		return llm.PlanOutput{Infeasible: fmt.Sprintf("the task needs %d steps, more than the limit of %d", len(p.order), max)}
	}
	first := in.FirstStep
	if first <= 0 {
		first = 1
	}
	return llm.PlanOutput{Steps: p.steps(first)}
}

// need records that skill consumer takes input field from a producer.
type need struct {
	consumer string
	field    string
	shape    schema.Shape
}

type planner struct {
	task  string
	cands []*planSkill
	order []*planSkill
	index map[string]int    // skill → position in order
	needs map[string][]need // producer → fields its consumers need
	deps  [][]string
}

// try adds s and the producers it needs, or leaves the plan as it was
// when s cannot be planned.
func (p *planner) try(s *planSkill) error {
	order, deps := slices.Clone(p.order), slices.Clone(p.deps)
	index, needs := maps.Clone(p.index), maps.Clone(p.needs)
	if err := p.add(s, 0); err != nil {
		p.order, p.deps, p.index, p.needs = order, deps, index, needs
		return err
	}
	return nil
}

func (p *planner) add(s *planSkill, depth int) error {
	if _, ok := p.index[s.info.Name]; ok {
		return nil
	}
	if depth > 10 {
		return fmt.Errorf("skill %s: input chain is too deep", s.info.Name)
	}
	var deps []string
	given := taskArgs(p.task, s.in)
	for _, field := range s.in.Required {
		if given[field] != nil {
			continue
		}
		prod := p.producer(field, s.in.Properties[field], s.info.Name)
		if prod == nil {
			return fmt.Errorf("skill %s needs %q and no discovered skill provides it", s.info.Name, field)
		}
		if err := p.add(prod, depth+1); err != nil {
			return err
		}
		p.needs[prod.info.Name] = append(p.needs[prod.info.Name], need{s.info.Name, field, s.in.Properties[field]})
		deps = append(deps, prod.info.Name)
	}
	p.index[s.info.Name] = len(p.order)
	p.order = append(p.order, s)
	p.deps = append(p.deps, deps)
	return nil
}

// producer returns the most relevant other skill whose output derives field.
func (p *planner) producer(field string, fieldShape schema.Shape, consumer string) *planSkill {
	want := schema.Shape{Type: "object", Properties: map[string]schema.Shape{field: fieldShape}}
	for _, c := range p.cands {
		if c.info.Name == consumer {
			continue
		}
		if _, err := schema.Derive(c.out, want); err == nil {
			return c
		}
	}
	return nil
}

func (p *planner) steps(first int) []llm.PlannedStep {
	out := make([]llm.PlannedStep, len(p.order))
	for i, s := range p.order {
		step := llm.PlannedStep{Step: first + i, Skills: []string{s.info.Name}}
		for _, d := range p.deps[i] {
			step.DependsOn = append(step.DependsOn, first+p.index[d])
		}
		needs := p.needs[s.info.Name]
		if len(needs) == 0 {
			shape, reason := finalShape(s.out, p.task)
			step.ReturnSpec = llm.ReturnSpec{Shape: mustJSON(shape), Reason: reason}
			step.Task = fmt.Sprintf("%s (for: %s)", strings.TrimSuffix(s.info.Description, "."), p.task)
		} else {
			shape := schema.Shape{Type: "object", Properties: map[string]schema.Shape{}}
			var users []string
			for _, n := range needs {
				shape.Properties[n.field] = n.shape
				shape.Required = append(shape.Required, n.field)
				users = append(users, fmt.Sprintf("%s needs %s", n.consumer, n.field))
			}
			sort.Strings(shape.Required)
			shape.Required = dedup(shape.Required)
			sort.Strings(users)
			step.ReturnSpec = llm.ReturnSpec{Shape: mustJSON(shape), Reason: strings.Join(dedup(users), "; ")}
			step.Task = fmt.Sprintf("%s, returning only %s (for: %s)", strings.TrimSuffix(s.info.Description, "."), strings.Join(shape.Required, ", "), p.task)
		}
		out[i] = step
	}
	return out
}

// taskArgs takes the input values a task states outright: an enum value
// the task names; for the required fields, in the schema's order, the
// numbers it contains (in order), its paths (for a field named for a
// path), a glob (for a pattern), and for free text a quoted phrase, else
// what follows "named", "about", "for" and the like, else its proper
// nouns. Step tasks carry the user's task as "(for: …)"; only that part
// is read, so a skill description's own numbers are never taken for
// arguments.
func taskArgs(task string, s schema.Shape) map[string]any {
	task = userTask(task)
	terms := text.Terms(task, nil)
	args := map[string]any{}
	for _, name := range sortedNames(s.Properties) {
		for _, e := range s.Properties[name].Enum {
			if str, ok := e.(string); ok && containsSeq(terms, text.Terms(str, nil)) {
				args[name] = str
				break
			}
		}
	}
	var paths []any
	for _, p := range pathRE.FindAllString(task, -1) {
		paths = append(paths, strings.TrimRight(p, ".?!)"))
	}
	plain := idRE.ReplaceAllString(pathRE.ReplaceAllString(task, " "), " ")
	numbers := numberRE.FindAllString(plain, -1)
	glob := globRE.FindString(plain)
	for _, name := range s.Required {
		if _, done := args[name]; done {
			continue
		}
		prop := s.Properties[name]
		switch {
		case (prop.Type == "number" || prop.Type == "integer") && len(numbers) > 0:
			var v float64
			if _, err := fmt.Sscan(numbers[0], &v); err == nil {
				args[name] = v
			}
			numbers = numbers[1:]
		case isPathField(name) && prop.Type == "string" && len(paths) > 0:
			args[name], paths = paths[0], paths[1:]
		case isPathField(name) && prop.Type == "array" && len(paths) > 0:
			args[name], paths = paths, nil
		case prop.Type == "string" && len(prop.Enum) == 0 && (name == "pattern" || name == "glob") && glob != "":
			args[name] = glob
		case prop.Type == "string" && len(prop.Enum) == 0:
			if v := phrase(task); v != "" {
				args[name] = v
			}
		case prop.Type == "array" && prop.Items != nil && prop.Items.Type == "string" && !strings.HasSuffix(name, "ids"):
			if v := phrase(task); v != "" {
				args[name] = []any{v}
			}
		}
	}
	return args
}

// isPathField reports a field named for a file system path.
func isPathField(name string) bool {
	n := strings.ToLower(name)
	switch n {
	case "file", "filename", "dir", "directory", "folder", "source", "destination", "root", "paths":
		return true
	}
	return strings.HasSuffix(n, "path")
}

// phrase is the free text a task gives: a quoted phrase, else the words
// after its last "named", "called", "about", "for", "matching" or
// "containing", else its proper nouns (capitalised words after the first).
func phrase(task string) string {
	if m := quotedRE.FindStringSubmatch(task); m != nil {
		return m[1] + m[2]
	}
	if m := cueRE.FindStringSubmatch(task); m != nil {
		v := strings.TrimSpace(strings.TrimRight(m[1], ".?!"))
		if v = strings.TrimPrefix(strings.TrimPrefix(v, "the "), "a "); v != "" {
			return v
		}
	}
	var nouns []string
	for i, w := range strings.Fields(task) {
		w = strings.Trim(w, ".,;:?!")
		if i > 0 && w != "" && w[0] >= 'A' && w[0] <= 'Z' {
			nouns = append(nouns, w)
		}
	}
	return strings.Join(nouns, " ")
}

var (
	numberRE = regexp.MustCompile(`-?\b\d+(?:\.\d+)?\b`)
	quotedRE = regexp.MustCompile(`"([^"]+)"|'([^']+)'`)
	pathRE   = regexp.MustCompile(`(?:~|\.{1,2})?/[^\s'",;]+`)
	idRE     = regexp.MustCompile(`\b[A-Za-z]+-\d+\b`)
	globRE   = regexp.MustCompile(`\S*\*\S*`)
	cueRE    = regexp.MustCompile(`(?i)^.*\b(?:named|called|about|for|matching|containing|titled)\s+(.+)$`)
)

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only called on plain data
	}
	return b
}

func dedup(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// replan revises only the remaining work: it issues the remaining steps
// again, numbered from FirstStep, keeping dependencies on completed steps
// and pointing dependencies on remaining steps at their new numbers. The
// failed step's skill is retried: the offline model has no better one.
func replan(in llm.PlanInput) llm.PlanOutput {
	first := in.FirstStep
	if first <= 0 {
		first = 1
	}
	renumber := map[int]int{}
	for i, s := range in.Remaining {
		renumber[s.Step] = first + i
	}
	out := make([]llm.PlannedStep, len(in.Remaining))
	for i, s := range in.Remaining {
		s.Step = first + i
		deps := make([]int, 0, len(s.DependsOn))
		for _, d := range s.DependsOn {
			if n, ok := renumber[d]; ok {
				d = n
			}
			deps = append(deps, d)
		}
		s.DependsOn = deps
		if s.ReturnSpec.Reason == "" {
			s.ReturnSpec.Reason = "revised after step " + fmt.Sprint(in.Failed.Step) + " failed"
		}
		out[i] = s
	}
	return llm.PlanOutput{Steps: out}
}

// finalShape is a final step's return_spec: the answer to the question
// the task asks of the skill's list of records (query), when its output
// has one; otherwise its whole output.
func finalShape(out schema.Shape, task string) (schema.Shape, string) {
	q := newQuery(task, out)
	if q == nil {
		return out, "the final answer is synthesised from it"
	}
	reason := "the answer to the task"
	if what := q.question(); what != "" {
		reason = what
	}
	if q.Narrow {
		reason = "the task asks only for " + strings.Join(q.Keep, ", ")
	}
	return q.shape(), reason
}
