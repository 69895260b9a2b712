package llm_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/llmtest"
)

func TestPricesLookupAndCost(t *testing.T) {
	p := llm.Prices{
		"gpt-4o":           {Input: 2.5, CachedInput: 1.25, Output: 10},
		"gpt-4o-mini":      {Input: 0.15, CachedInput: 0.075, Output: 0.6},
		"anthropic.claude": {Input: 3, CachedInput: 0.3, Output: 15},
	}
	// 1M input tokens of which half cached, 1M output tokens.
	u := llm.Usage{InputTokens: 1_000_000, CachedInputTokens: 500_000, OutputTokens: 1_000_000}
	cases := []struct {
		model string
		want  float64
	}{
		{"gpt-4o", 0.5*2.5 + 0.5*1.25 + 10},
		{"gpt-4o-2024-08-06", 0.5*2.5 + 0.5*1.25 + 10},          // by prefix
		{"gpt-4o-mini-2024-07-18", 0.5*0.15 + 0.5*0.075 + 0.6},  // the longest prefix wins
		{"us.anthropic.claude-3-5-haiku", 0.5*3 + 0.5*0.3 + 15}, // a region prefix is tried away
		{"unknown-model", 0},
	}
	for _, tc := range cases {
		if got := p.Cost(tc.model, u); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("Cost(%s) = %v, want %v", tc.model, got, tc.want)
		}
	}
}

func TestLoadPrices(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "prices.json")
	os.WriteFile(good, []byte(`{"test-model": {"input": 1, "cached_input": 0.5, "output": 2}, "gpt-4o": {"input": 9, "output": 9}}`), 0o600)
	p, err := llm.LoadPrices(good)
	if err != nil {
		t.Fatal(err)
	}
	if pr, ok := p.Lookup("test-model"); !ok || pr.Output != 2 {
		t.Errorf("added entry = %+v, %v", pr, ok)
	}
	if pr, _ := p.Lookup("gpt-4o"); pr.Input != 9 {
		t.Errorf("override not applied: %+v", pr)
	}
	if _, ok := p.Lookup("claude-sonnet-4-20250514"); !ok {
		t.Errorf("built-in entries lost")
	}
	for name, body := range map[string]string{
		"unknown field": `{"m": {"input": 1, "per_call": 3}}`,
		"negative":      `{"m": {"input": -1}}`,
		"not JSON":      `{`,
	} {
		f := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		os.WriteFile(f, []byte(body), 0o600)
		if _, err := llm.LoadPrices(f); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
	if _, err := llm.LoadPrices(filepath.Join(dir, "missing.json")); err == nil {
		t.Errorf("a missing file loaded")
	}
}

func TestMeteredPricesCountsAndTimes(t *testing.T) {
	m := llm.Metered{Model: llmtest.New().Then(llmtest.Reply{Response: llm.Response{Model: "test-model",
		Usage: llm.Usage{InputTokens: 1000, OutputTokens: 500}}}), Prices: llm.Prices{"test-model": {Input: 1, Output: 2}}}
	resp, err := m.Complete(context.Background(), llm.Request{Task: llm.TaskAct})
	if err != nil {
		t.Fatal(err)
	}
	if want := (1000*1.0 + 500*2.0) / 1e6; math.Abs(resp.Usage.CostUSD-want) > 1e-12 || resp.Usage.Calls != 1 {
		t.Errorf("usage = %+v, want cost %v and 1 call", resp.Usage, want)
	}
	if resp.Latency <= 0 {
		t.Errorf("latency not measured")
	}
}

func TestFallbackOnlyWhenUnavailable(t *testing.T) {
	secondary := llmtest.Sequence(llm.Response{Model: "offline", Message: llm.Message{Content: "from the fallback"}})
	f := llm.Fallback{Primary: llmtest.New().Then(llmtest.Fail(llm.ErrUnavailable)), Secondary: secondary}
	resp, err := f.Complete(context.Background(), llm.Request{Task: llm.TaskSynthesize})
	if err != nil || resp.Message.Content != "from the fallback" || resp.FallbackReason == "" {
		t.Fatalf("resp = %+v, err = %v; want the secondary's answer with the reason", resp, err)
	}
	other := errors.New("a bug, not an outage")
	f = llm.Fallback{Primary: llmtest.New().Then(llmtest.Fail(other)), Secondary: llmtest.Sequence(llm.Response{})}
	if _, err := f.Complete(context.Background(), llm.Request{}); !errors.Is(err, other) {
		t.Fatalf("err = %v; only an unavailable provider falls back", err)
	}
}

func TestRecorderRecordsEveryCall(t *testing.T) {
	m := llmtest.New().Then(
		llmtest.Reply{Response: llm.Response{Model: "m1", Provider: "openai", Usage: llm.Usage{InputTokens: 10, OutputTokens: 2, CostUSD: 0.25, Calls: 1}}},
		llmtest.Fail(llm.ErrUnavailable))
	rec := llm.Record(m)
	req := llm.NewRequest(llm.TaskPlan, nil)
	rec.Complete(context.Background(), req)
	rec.Complete(context.Background(), req)
	calls := rec.Calls()
	if len(calls) != 2 || calls[0].Model != "m1" || calls[0].PromptVersion != "plan@v5" || calls[0].InputTokens != 10 ||
		calls[1].Error == "" {
		t.Fatalf("calls = %+v", calls)
	}
	if tot := rec.Total(); tot.InputTokens != 10 || tot.CostUSD != 0.25 || tot.Calls != 1 {
		t.Errorf("total = %+v; a failed call counts no tokens and no call", tot)
	}
}

// A recorder that keeps payloads records what each call asked and what
// the model answered, with personal data and credentials masked and the
// whole clipped; one that does not keeps neither.
func TestRecorderKeepsRedactedPayloadsOnlyWhenAsked(t *testing.T) {
	answer := `{"steps":[],"infeasible":"write to ada@example.com"}`
	m := llmtest.New()
	m.Repeat = true
	m.Then(llmtest.Text(answer))
	req := llm.NewRequest(llm.TaskPlan, llm.PlanInput{Task: "Plan for ada@example.com with token sk_live_abcdef123456 " +
		strings.Repeat("and more ", 2000)})
	kept := llm.Record(m).KeepPayloads(true)
	if _, err := kept.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	c := kept.Calls()[0]
	if !strings.Contains(c.Request, "Plan for [EMAIL] with token [REDACTED]") || strings.Contains(c.Request, "sk_live") ||
		len(c.Request) > llm.MaxPayloadRecord+len("…") || !strings.HasSuffix(c.Request, "…") {
		t.Errorf("request record %.200q (%d bytes)", c.Request, len(c.Request))
	}
	if c.Response != `{"steps":[],"infeasible":"write to [EMAIL]"}` {
		t.Errorf("answer record %q", c.Response)
	}
	plain := llm.Record(m)
	if _, err := plain.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if c := plain.Calls()[0]; c.Request != "" || c.Response != "" {
		t.Errorf("a recorder not asked to keep payloads kept %q / %q", c.Request, c.Response)
	}
}

func TestEveryTaskHasAVersionedPrompt(t *testing.T) {
	for _, task := range llm.Tasks {
		p := llm.SystemPrompt(task)
		if len(p.Text) < 100 || !strings.HasPrefix(p.Version, string(task)+"@v") {
			t.Errorf("%s: prompt %q (%d chars)", task, p.Version, len(p.Text))
		}
	}
}

func TestConversationRendersInputAndSchema(t *testing.T) {
	req := llm.NewRequest(llm.TaskRoute, llm.RouteInput{Task: "rank the outlets"})
	req.Schema = llm.RouteSchema
	req.Messages = []llm.Message{{Role: llm.RoleAssistant, Content: "earlier"}}
	msgs, err := llm.Conversation(req)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[0].Role != llm.RoleUser || !strings.Contains(msgs[0].Content, `"task": "rank the outlets"`) ||
		!strings.Contains(msgs[0].Content, `"task_type"`) || msgs[1].Content != "earlier" {
		t.Fatalf("conversation = %+v", msgs)
	}
	if _, err := llm.Conversation(llm.Request{Input: func() {}}); !errors.Is(err, llm.ErrBadInput) {
		t.Errorf("an input that cannot be rendered: err = %v", err)
	}
}

// TestEstimateInputTokensCountsFourBytesAToken: the estimate a budget
// reserves is the request's system prompt, messages, tool calls, tools
// and its typed input as json.Marshal encodes it, at four bytes a token.
func TestEstimateInputTokensCountsFourBytesAToken(t *testing.T) {
	in := llm.RouteInput{Task: "rank <outlets> & \"engagement\"", TaskTypes: []llm.TaskType{{Name: "analysis", Description: "é"}}}
	encoded, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	req := llm.Request{System: "system", Input: in,
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "hello", ToolCalls: []llm.ToolCall{{Name: "call", Arguments: json.RawMessage(`{"a":1}`)}}}},
		Tools:    []llm.Tool{{Name: "tool", Description: "does", Parameters: json.RawMessage(`{"type":"object"}`)}}}
	want := (len("system") + len("hello") + len("call") + len(`{"a":1}`) + len("tool") + len("does") + len(`{"type":"object"}`) + len(encoded)) / 4
	if got := llm.EstimateInputTokens(req); got != want+1 {
		t.Errorf("estimate %d tokens, want %d", got, want+1)
	}
}
