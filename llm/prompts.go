package llm

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

//go:embed prompts/*.md
var promptFiles embed.FS

// Prompt is a role's system prompt and its version, "<task>@v<N>". The
// version travels with every model call into the trace, so a run's
// behaviour can be traced to the exact prompt text it was given.
type Prompt struct {
	Text    string
	Version string
}

var prompts = loadPrompts()

// loadPrompts reads prompts/<task>.v<N>.md and keeps the highest N of
// each task.
func loadPrompts() map[Task]Prompt {
	out := map[Task]Prompt{}
	best := map[Task]int{}
	names, err := fs.Glob(promptFiles, "prompts/*.md")
	if err != nil {
		panic(err)
	}
	sort.Strings(names)
	for _, name := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(name, "prompts/"), ".md")
		task, ver, ok := strings.Cut(base, ".v")
		n, err := strconv.Atoi(ver)
		if !ok || err != nil {
			panic(fmt.Sprintf("llm: prompt file %s is not named <task>.v<N>.md", name))
		}
		if n <= best[Task(task)] {
			continue
		}
		b, err := promptFiles.ReadFile(name)
		if err != nil {
			panic(err)
		}
		best[Task(task)] = n
		out[Task(task)] = Prompt{Text: strings.TrimSpace(string(b)), Version: fmt.Sprintf("%s@v%d", task, n)}
	}
	return out
}

// SystemPrompt returns the current system prompt of task. Every task has
// one; a missing file is a build mistake caught by the tests.
func SystemPrompt(task Task) Prompt { return prompts[task] }

// NewRequest returns a request for task with its current system prompt.
func NewRequest(task Task, input any) Request {
	p := SystemPrompt(task)
	return Request{Task: task, System: p.Text, PromptVersion: p.Version, Input: input}
}
