package offline

import (
	"fmt"
	"slices"
	"sync"

	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/schema"
)

// extract writes the extraction script for a large response. When the
// step's return_spec is a query's (the offline planner's), the script
// answers the question in the sandbox: it filters, counts, takes distinct
// values, averages, sorts and cuts to the top n (query.python). Otherwise
// it projects the skill's output onto the return_spec, in Python, as the
// blueprint's large-response path does, and in jq when the sandbox offers
// no Python. A script the sandbox rejected (Feedback) is followed by a
// narrower one: never the same script twice for one response.
func (o *Model) extract(in llm.ExtractInput) (llm.Message, error) {
	out, err := schema.ParseShape(in.Skill.OutputSchema)
	if err != nil {
		return llm.Message{}, fmt.Errorf("offline: %w", err)
	}
	shape, err := schema.ParseShape(in.ReturnSpec.Shape)
	if err != nil {
		return llm.Message{}, fmt.Errorf("offline: %w", err)
	}
	level := o.attempts.next(in.FileID, in.Feedback)
	python := slices.Contains(in.Languages, "python") || len(in.Languages) == 0
	if q := newQuery(in.Task, out); q != nil && isQueryShape(shape) && python {
		return jsonMessage(llm.ExtractOutput{Language: "python", Script: q.python(level)})
	}
	ds, err := schema.Derive(out, shape)
	if err != nil {
		if q := newQuery(in.Task, out); q != nil && python {
			// The return_spec is not the output's: answer the question.
			return jsonMessage(llm.ExtractOutput{Language: "python", Script: q.python(max(level, len(maxRecords)-1))})
		}
		return llm.Message{}, fmt.Errorf("offline: cannot extract the return_spec: %w", err)
	}
	if python {
		return jsonMessage(llm.ExtractOutput{Language: "python", Script: limitRows(schema.Python(ds), level)})
	}
	return jsonMessage(llm.ExtractOutput{Language: "jq", Script: schema.JQ(ds)})
}

// limitRows narrows a projection script at a later attempt: its lists are
// cut to the level's cap.
func limitRows(script string, level int) string {
	if level == 0 {
		return script
	}
	return script[:len(script)-len("print(json.dumps(out))\n")] + fmt.Sprintf(
		"# attempt %d: at most %d records a list\nout = {k: v[:%d] if isinstance(v, list) else v for k, v in out.items()}\nprint(json.dumps(out))\n",
		level+1, maxRecords[min(level, len(maxRecords)-1)], maxRecords[min(level, len(maxRecords)-1)])
}

// attempts counts the scripts written for each large response (by its
// temp file, unique to one extraction), so that each later attempt is a
// narrower script. It forgets the oldest responses past maxTracked.
type attempts struct {
	mu    sync.Mutex
	count map[string]int
	order []string
}

const maxTracked = 1024

// next returns the attempt level for fileID: 0 for a first script, one
// more for each script rejected since.
func (a *attempts) next(fileID, feedback string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.count == nil {
		a.count = map[string]int{}
	}
	n, seen := a.count[fileID]
	if !seen {
		a.order = append(a.order, fileID)
		if len(a.order) > maxTracked {
			delete(a.count, a.order[0])
			a.order = a.order[1:]
		}
	}
	if feedback == "" && !seen {
		n = 0
	}
	a.count[fileID] = n + 1
	return n
}
