package offline

import (
	"regexp"
	"strings"

	"github.com/agentbus/agentbus/llm"
)

// A recalled fact the offline model understands states what one of the
// user's (or the organisation's) things is: "My home city is Melbourne",
// "our fiscal year: July to June". Its words name the thing (at most six
// words) and what follows "is", "are" or ":" up to the end of the clause
// is its value.
var factRE = regexp.MustCompile(`(?i)\b(?:my|our) +([a-z][a-z0-9'-]*(?: +[a-z][a-z0-9'-]*){0,5}?)\s*(?:\bis\b|\bare\b|:)\s*([^.;\n]*[^.;\n\s])`)

// fact is one statement of a recalled memory.
type fact struct {
	thing, value, memory string
}

// facts reads the statements of the recalled memories, best first.
func facts(mems []llm.RecalledMemory) []fact {
	var out []fact
	for _, m := range mems {
		for _, g := range factRE.FindAllStringSubmatch(m.Text, -1) {
			out = append(out, fact{thing: strings.ToLower(g[1]), value: strings.TrimSpace(g[2]), memory: m.ID})
		}
	}
	return out
}

// recallTask resolves what the task says of the user's things ("in my
// home city") with the recalled facts that state them ("My home city is
// Melbourne"): the task then names the value ("in Melbourne"), which the
// planner, the executor and the answer use as if the user had written
// it. It returns the resolved task and the ids of the memories it used.
// A task that names nothing the facts state is returned as it is.
func recallTask(task string, mems []llm.RecalledMemory) (string, []string) {
	var used []string
	for _, f := range facts(mems) {
		ref := regexp.MustCompile(`(?i)\b(?:my|our)\s+` + regexp.QuoteMeta(f.thing) + `\b`)
		if !ref.MatchString(task) {
			continue
		}
		task = ref.ReplaceAllLiteralString(task, f.value)
		if len(used) == 0 || used[len(used)-1] != f.memory {
			used = append(used, f.memory)
		}
	}
	return task, used
}

// synthesizeRecalling is synthesize of the task as the recalled facts
// resolve it, naming the memories the answer used.
func synthesizeRecalling(in llm.SynthInput) string {
	var used []string
	in.Task, used = recallTask(in.Task, in.Memories)
	answer := synthesize(in)
	for _, id := range used {
		answer += "\n(recalled: memory " + id + ")"
	}
	return answer
}
