package bench

import (
	"context"
	"fmt"
	"regexp"
	"sync"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/cmd/internal/bench/pipeline"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/offline"
)

// sleepyModel is the offline model behind a fixed per-call latency. It
// records model time per run, by the run tag in the task text.
type sleepyModel struct {
	inner   llm.Model
	latency time.Duration
	mu      sync.Mutex
	byRun   map[string]time.Duration
}

var runTag = regexp.MustCompile(`\(run [0-9a-z-]+\)`)

func newSleepyModel(latency time.Duration) *sleepyModel {
	return &sleepyModel{inner: newPipelineModel(), latency: latency, byRun: map[string]time.Duration{}}
}

// Complete sleeps, then answers like the offline model.
func (m *sleepyModel) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	start := time.Now()
	if m.latency > 0 {
		select {
		case <-time.After(m.latency):
		case <-ctx.Done():
			return llm.Response{}, ctx.Err()
		}
	}
	resp, err := m.inner.Complete(ctx, req)
	if b, jerr := json.Marshal(req.Input); jerr == nil {
		if tag := runTag.Find(b); tag != nil {
			m.mu.Lock()
			m.byRun[string(tag)] += time.Since(start)
			m.mu.Unlock()
		}
	}
	return resp, err
}

// modelTime returns the model time spent for a run tag.
func (m *sleepyModel) modelTime(tag string) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.byRun[tag]
}

// loopModel makes the first step of a run loop: it calls the step's skill
// until it has made iterations calls, then answers like the offline model.
// It stands for a long ReACT loop.
type loopModel struct {
	inner      llm.Model
	iterations int
}

// Complete calls the tool again until the loop is long enough.
func (m *loopModel) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	in, ok := req.Input.(llm.ActInput)
	if !ok || len(in.Skills) == 0 || in.Skills[0].Name != "stage1" || callsMade(req.Messages) >= m.iterations {
		return m.inner.Complete(ctx, req)
	}
	return llm.Response{Message: llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{
		ID: "loop", Name: in.Skills[0].Name, Arguments: json.RawMessage(`{}`)}}}}, nil
}

// callsMade counts the tool calls in a history, including those folded
// into a summary turn.
func callsMade(msgs []llm.Message) int {
	n := 0
	for _, m := range msgs {
		n += len(m.ToolCalls)
		var s struct {
			Calls map[string]int `json:"calls"`
		}
		if m.Role == llm.RoleUser && json.Unmarshal([]byte(afterColon(m.Content)), &s) == nil {
			for _, c := range s.Calls {
				n += c
			}
		}
	}
	return n
}

func afterColon(s string) string {
	for i := range s {
		if s[i] == '{' {
			return s[i:]
		}
	}
	return ""
}

// pipelineModel pins the benchmark's run to five sequential steps: a
// first plan chains the five stages, each step returning the ids the next
// one takes. The offline planner picks the skills a task's words call
// for, and how it ranks them changes with it; the run the figures measure
// must not. A stage's two turns are scripted too, as the peers' fake
// models script "decide" and "step_output": the call of the stage's skill
// with the ids the step before returned, then the step's output from the
// call's result. The offline model would reach the same answers by
// parsing and matching the skills' schemas on every turn, work a real
// model does on its own machine and the peers' fakes do not do at all.
// Everything else (the route, a replan, a failed call, the synthesis) is
// the inner model's.
type pipelineModel struct {
	inner llm.Model
}

func newPipelineModel() *pipelineModel { return &pipelineModel{inner: offline.New()} }

// Complete answers a first plan with the chain, and any other request
// like the inner model.
func (m *pipelineModel) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	if act, ok := req.Input.(llm.ActInput); ok {
		if msg, ok := stageTurn(act, req.Messages); ok {
			return llm.Response{Message: msg, Usage: stageUsage(act, req.Messages, msg), Model: "bench"}, nil
		}
		return m.inner.Complete(ctx, req)
	}
	in, ok := req.Input.(llm.PlanInput)
	if !ok || in.Failed != nil || len(in.Completed) > 0 {
		return m.inner.Complete(ctx, req)
	}
	b, err := json.Marshal(llm.PlanOutput{Steps: pipelinePlan(max(in.FirstStep, 1), in.Task)})
	if err != nil {
		return llm.Response{}, err
	}
	return llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: string(b)}, Model: "bench"}, nil
}

// pipelinePlan is the chain of the five stages of task, numbered from
// first: stage k depends on stage k-1 and returns the s<k>_ids stage k+1
// needs; the last returns its ranked results. Each stage's task names the
// run's (so the model time of a tagged run is found in its stages' calls).
func pipelinePlan(first int, task string) []llm.PlannedStep {
	steps := make([]llm.PlannedStep, pipeline.Stages)
	for k := 1; k <= pipeline.Stages; k++ {
		s := llm.PlannedStep{Step: first + k - 1, Skills: []string{fmt.Sprintf("stage%d", k)}}
		if k > 1 {
			s.DependsOn = []int{first + k - 2}
		}
		if k < pipeline.Stages {
			field := fmt.Sprintf("s%d_ids", k)
			s.Task = fmt.Sprintf("Bench pipeline stage %d of five, returning only %s (for: %s)", k, field, task)
			s.ReturnSpec = llm.ReturnSpec{
				Shape:  json.RawMessage(fmt.Sprintf(`{"type":"object","required":[%q],"properties":{%q:{"type":"array","items":{"type":"string"}}}}`, field, field)),
				Reason: fmt.Sprintf("stage%d needs %s", k+1, field)}
		} else {
			s.Task = fmt.Sprintf("Bench pipeline stage %d of five (for: %s)", k, task)
			s.ReturnSpec = llm.ReturnSpec{
				Shape:  json.RawMessage(`{"type":"object","required":["results"],"properties":{"results":{"type":"array","items":{"type":"object","properties":{"item_id":{"type":"string"},"name":{"type":"string"},"score":{"type":"number"},"rank":{"type":"integer"}}}}}}`),
				Reason: "the answer to the task"}
		}
		steps[k-1] = s
	}
	return steps
}

// stageTurn is a pipeline stage's turn: with no call made yet, a call of
// the stage's skill with the ids of the stage before (none for the
// first); after the call's result, the step's output: the result's ids
// (s<k>_ids), or, for the last stage, its results as they are. ok is
// false for any other turn, which the inner model answers.
func stageTurn(in llm.ActInput, history []llm.Message) (msg llm.Message, ok bool) {
	k := 0
	if len(in.Skills) != 1 || len(history) > 2 {
		return msg, false
	}
	if _, err := fmt.Sscanf(in.Skills[0].Name, "stage%d", &k); err != nil || k < 1 || k > pipeline.Stages {
		return msg, false
	}
	name := in.Skills[0].Name
	if len(history) == 0 {
		args := []byte(`{}`)
		if k > 1 {
			field := fmt.Sprintf("s%d_ids", k-1)
			var ids []string
			for _, raw := range in.Inputs {
				var out map[string][]string
				if json.Unmarshal(raw, &out) == nil && out[field] != nil {
					ids = out[field]
				}
			}
			if ids == nil {
				return msg, false
			}
			var err error
			if args, err = json.Marshal(map[string][]string{field: ids}); err != nil {
				return msg, false
			}
		}
		return llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call-1", Name: name, Arguments: args}}}, true
	}
	res := history[len(history)-1]
	if res.Role != llm.RoleTool || res.IsError {
		return msg, false
	}
	out := llm.ActOutput{Status: "complete", Label: "results", Data: json.RawMessage(res.Content)}
	if k < pipeline.Stages {
		var items map[string][]map[string]any
		if json.Unmarshal([]byte(res.Content), &items) != nil {
			return msg, false
		}
		var ids []string
		for _, it := range items[fmt.Sprintf("s%d_items", k)] {
			if id, ok := it[fmt.Sprintf("s%d_id", k)].(string); ok {
				ids = append(ids, id)
			}
		}
		field := fmt.Sprintf("s%d_ids", k)
		data, err := json.Marshal(map[string][]string{field: ids})
		if err != nil {
			return msg, false
		}
		out.Label, out.Data = field, data
	}
	b, err := json.Marshal(out)
	if err != nil {
		return msg, false
	}
	return llm.Message{Role: llm.RoleAssistant, Content: string(b)}, true
}

// stageUsage is what a stage's turn reports using, as a real model's
// answer reports it: about four characters a token of the step's task,
// its inputs, the turns so far and the answer. (The offline model counts
// the whole request, encoded, which is its own work, not the run's.)
func stageUsage(in llm.ActInput, history []llm.Message, answer llm.Message) llm.Usage {
	n := len(in.Task)
	for _, raw := range in.Inputs {
		n += len(raw)
	}
	for _, m := range history {
		n += messageSize(m)
	}
	return llm.Usage{InputTokens: n/4 + 1, OutputTokens: messageSize(answer)/4 + 1}
}

// messageSize is the characters of m's content and tool calls.
func messageSize(m llm.Message) int {
	n := len(m.Content)
	for _, c := range m.ToolCalls {
		n += len(c.Name) + len(c.Arguments)
	}
	return n
}
