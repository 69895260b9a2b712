package bench

import (
	"context"
	"regexp"
	"sync"
	"time"

	json "github.com/go-json-experiment/json/v1"

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
	return &sleepyModel{inner: offline.New(), latency: latency, byRun: map[string]time.Duration{}}
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
