package offline

import (
	"fmt"
	"regexp"
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

// plan chains skills: it picks the skills most relevant to the task, adds
// the producers their required inputs need (an output that derives the
// input), orders producers first and derives each step's return_spec from
// what its consumers need, or from its whole output for a final step.
func plan(in llm.PlanInput) llm.PlanOutput {
	if in.Failed != nil && len(in.Remaining) > 0 {
		return replan(in)
	}
	words := wordSet(in.Task)
	var cands []*planSkill
	for _, s := range in.Skills {
		ps := &planSkill{info: s, relevance: overlap(words, wordSet(strings.ReplaceAll(s.Name, "_", " ")+" "+s.Description))}
		var err error
		if ps.in, err = schema.ParseShape(s.InputSchema); err != nil {
			continue
		}
		if ps.out, err = schema.ParseShape(s.OutputSchema); err != nil {
			continue
		}
		cands = append(cands, ps)
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].relevance > cands[j].relevance })
	if len(cands) == 0 || cands[0].relevance == 0 {
		return llm.PlanOutput{Infeasible: "no discovered skill fits the task"}
	}
	p := planner{task: in.Task, cands: cands, index: map[string]int{}, needs: map[string][]need{}}
	for _, c := range cands {
		if c.relevance*2 >= cands[0].relevance {
			if err := p.add(c, 0); err != nil {
				return llm.PlanOutput{Infeasible: err.Error()}
			}
		}
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
			shape, reason := narrow(s.out, p.task)
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
// the task mentions, the numbers it contains (in order, for the required
// number fields in the schema's required order) and a quoted phrase (for
// the first required free-text field). Step tasks carry the user's task
// as "(for: …)"; only that part is read, so a skill description's own
// numbers are never taken for arguments.
func taskArgs(task string, s schema.Shape) map[string]any {
	if i := strings.LastIndex(task, "(for: "); i >= 0 {
		task = strings.TrimSuffix(task[i+len("(for: "):], ")")
	}
	words := wordSet(task)
	args := map[string]any{}
	for _, name := range sortedNames(s.Properties) {
		for _, e := range s.Properties[name].Enum {
			if str, ok := e.(string); ok && words[text.Stem(strings.ToLower(str))] {
				args[name] = str
				break
			}
		}
	}
	numbers := numberRE.FindAllString(task, -1)
	quoted := quotedRE.FindStringSubmatch(task)
	for _, name := range s.Required {
		if _, done := args[name]; done {
			continue
		}
		switch prop := s.Properties[name]; {
		case (prop.Type == "number" || prop.Type == "integer") && len(numbers) > 0:
			var v float64
			if _, err := fmt.Sscan(numbers[0], &v); err == nil {
				args[name] = v
			}
			numbers = numbers[1:]
		case prop.Type == "string" && len(prop.Enum) == 0 && quoted != nil:
			args[name] = quoted[1] + quoted[2]
			quoted = nil
		}
	}
	return args
}

var (
	numberRE = regexp.MustCompile(`-?\b\d+(?:\.\d+)?\b`)
	quotedRE = regexp.MustCompile(`"([^"]+)"|'([^']+)'`)
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

// narrow limits a final step's return_spec to the record fields the task
// names, when it names at least two fields of one list ("every menu item
// id with its category" keeps item_id and category): a response may be
// megabytes, and the answer needs only those. Otherwise the whole output.
func narrow(out schema.Shape, task string) (schema.Shape, string) {
	words := wordSet(task)
	named := func(field string) bool {
		for _, tok := range strings.Split(field, "_") {
			if !words[text.Stem(strings.ToLower(tok))] {
				return false
			}
		}
		return true
	}
	shape := schema.Shape{Type: "object", Properties: map[string]schema.Shape{}}
	var kept []string
	for _, name := range sortedNames(out.Properties) {
		prop := out.Properties[name]
		if prop.Type != "array" || prop.Items == nil || prop.Items.Type != "object" {
			continue
		}
		item := schema.Shape{Type: "object", Properties: map[string]schema.Shape{}}
		for _, f := range sortedNames(prop.Items.Properties) {
			if named(f) {
				item.Properties[f] = prop.Items.Properties[f]
				item.Required = append(item.Required, f)
				kept = append(kept, f)
			}
		}
		if len(item.Properties) >= 2 {
			shape.Properties[name] = schema.Shape{Type: "array", Items: &item}
			shape.Required = append(shape.Required, name)
		}
	}
	if len(shape.Properties) == 0 {
		return out, "the final answer is synthesised from it"
	}
	return shape, "the task asks only for " + strings.Join(kept, ", ")
}
