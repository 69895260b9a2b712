// Package pipeline is the benchmark's run: five chained skills, stage k
// taking the ids stage k-1 produced, served in process (Skills) or as a
// Skill Service over MCP (Server).
package pipeline

import (
	"context"
	"fmt"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/skills"
)

// Task is the task whose offline plan chains the five pipeline skills:
// five steps, each feeding the next.
const Task = "Run the five stage bench pipeline"

// Skills is an in-process Skill Service of five chained skills:
// stage k takes the ids stage k-1 produced. It satisfies the planner's and
// the executor's skill interfaces without a network hop, so the benchmark
// measures orchestration, not HTTP.
type Skills struct {
	manifests map[string]skills.Manifest
	names     []string
	latency   time.Duration // slept in every call
}

// Stages is the number of Stages, and of the run's steps.
const Stages = 5

// Close releases nothing: the skills live in the process.
func (p *Skills) Close() error { return nil }

// NewSkills is the five stages, each sleeping latency in every call.
func NewSkills(latency time.Duration) *Skills {
	yes, no := true, false
	p := &Skills{manifests: map[string]skills.Manifest{}, latency: latency}
	for k := 1; k <= Stages; k++ {
		name := fmt.Sprintf("stage%d", k)
		in := `{"type":"object","properties":{}}`
		if k > 1 {
			in = fmt.Sprintf(`{"type":"object","required":["s%d_ids"],"properties":{"s%d_ids":{"type":"array","items":{"type":"string"}}}}`, k-1, k-1)
		}
		out := fmt.Sprintf(`{"type":"object","properties":{"s%d_items":{"type":"array","items":{"type":"object","properties":{"s%d_id":{"type":"string"},"value":{"type":"number"}}}}}}`, k, k)
		if k == Stages {
			out = `{"type":"object","properties":{"results":{"type":"array","items":{"type":"object","properties":{"item_id":{"type":"string"},"name":{"type":"string"},"score":{"type":"number"},"rank":{"type":"integer"}}}}}}`
		}
		p.manifests[name] = skills.Manifest{Name: name, Description: fmt.Sprintf("Bench pipeline stage %d of five", k),
			InputSchema: json.RawMessage(in), OutputSchema: json.RawMessage(out), ExecutionMode: skills.ExecutionModeSync,
			// In-process computations: they read, change nothing and reach
			// nothing outside, so they draw no side effect or external call.
			Annotations: &skills.Annotations{ReadOnlyHint: &yes, OpenWorldHint: &no}}
		p.names = append(p.names, name)
	}
	return p
}

// Find returns every stage, last stage first, as a relevance ranking would.
func (p *Skills) Find(_ context.Context, _, _ string, limit int) ([]skills.Summary, error) {
	var out []skills.Summary
	for i := len(p.names) - 1; i >= 0 && len(out) < limit; i-- {
		m := p.manifests[p.names[i]]
		out = append(out, skills.Summary{Name: m.Name, Description: m.Description, Score: 1})
	}
	return out, nil
}

// Load returns a stage's manifest.
func (p *Skills) Load(_ context.Context, _, name string) (skills.Manifest, error) {
	m, ok := p.manifests[name]
	if !ok {
		return m, fmt.Errorf("%w: %s", skills.ErrSkillNotFound, name)
	}
	return m, nil
}

// Call runs a stage: eight items derived from its input ids.
func (p *Skills) Call(ctx context.Context, _, name string, args json.RawMessage, _ string) ([]byte, error) {
	if p.latency > 0 {
		select {
		case <-time.After(p.latency):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	k := 0
	if _, err := fmt.Sscanf(name, "stage%d", &k); err != nil || k < 1 || k > Stages {
		return nil, fmt.Errorf("%w: %s", skills.ErrSkillNotFound, name)
	}
	var in map[string][]string
	_ = json.Unmarshal(args, &in)
	seed := strings.Join(in[fmt.Sprintf("s%d_ids", k-1)], ",")
	items := make([]map[string]any, 8)
	for i := range items {
		id := fmt.Sprintf("s%d-%d", k, i+1)
		if k == Stages {
			items[i] = map[string]any{"item_id": id, "name": "item " + id, "score": float64(100 - 10*i), "rank": i + 1}
			continue
		}
		items[i] = map[string]any{fmt.Sprintf("s%d_id", k): id, "value": len(seed) + i}
	}
	key := fmt.Sprintf("s%d_items", k)
	if k == Stages {
		key = "results"
	}
	return json.Marshal(map[string]any{key: items})
}
