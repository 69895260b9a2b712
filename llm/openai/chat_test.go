package openai_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/openai"
	"github.com/agentbus/agentbus/store"
)

const testKey = "sk-openai-test-3f9a1c77d2e04b6a"

// fakeServer answers POSTs under /v1 with the fixtures handed to it in
// order (the last repeats) and records each request.
type fakeServer struct {
	t       *testing.T
	mu      sync.Mutex
	replies []reply
	reqs    []recorded
}

type reply struct {
	status  int
	headers map[string]string
	fixture string // a file under testdata, or "" for a JSON error body
	sse     bool
}

type recorded struct {
	path   string
	header http.Header
	body   map[string]any
	at     time.Time
}

func newServer(t *testing.T, replies ...reply) (*fakeServer, string) {
	f := &fakeServer{t: t, replies: replies}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	return f, srv.URL + "/v1"
}

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(b, &body)
	f.mu.Lock()
	f.reqs = append(f.reqs, recorded{path: r.URL.Path, header: r.Header.Clone(), body: body, at: time.Now()})
	rep := f.replies[min(len(f.reqs), len(f.replies))-1]
	f.mu.Unlock()
	for k, v := range rep.headers {
		w.Header().Set(k, v)
	}
	if rep.fixture == "" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.status)
		fmt.Fprintf(w, `{"error":{"message":"scripted failure %d","type":"server_error","param":null,"code":null}}`, rep.status)
		return
	}
	data, err := os.ReadFile(filepath.Join("testdata", rep.fixture))
	if err != nil {
		f.t.Errorf("fixture: %v", err)
	}
	if rep.sse {
		w.Header().Set("Content-Type", "text/event-stream")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(max(rep.status, http.StatusOK))
	_, _ = w.Write(data)
}

func (f *fakeServer) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

func newModel(t *testing.T, url string, retries int) *openai.Model {
	t.Helper()
	temp := 0.2
	m, err := openai.New(llm.ProviderConfig{Model: "gpt-4.1-mini", BaseURL: url, APIKey: testKey, MaxTokens: 777,
		Temperature: &temp, MaxRetries: retries, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func messages(t *testing.T, body map[string]any) []map[string]any {
	t.Helper()
	raw, _ := body["messages"].([]any)
	var out []map[string]any
	for _, m := range raw {
		out = append(out, m.(map[string]any))
	}
	return out
}

// TestStructuredOutput: a route request goes out as a chat completion
// with the system prompt, the rendered input, the json_schema response
// format, the key, model, token limit and temperature; the answer's
// content, model id and usage (with cached tokens) come back.
func TestStructuredOutput(t *testing.T) {
	srv, url := newServer(t, reply{fixture: "chat_structured.json"})
	req := llm.NewRequest(llm.TaskRoute, llm.RouteInput{Task: "rank the outlets", TaskTypes: []llm.TaskType{{Name: "general"}}})
	req.Schema = llm.RouteSchema
	resp, err := newModel(t, url, 0).Complete(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	got := srv.requests()[0]
	if got.path != "/v1/chat/completions" || got.header.Get("Authorization") != "Bearer "+testKey {
		t.Errorf("sent to %s with authorization %q", got.path, got.header.Get("Authorization"))
	}
	if got.body["model"] != "gpt-4.1-mini" || got.body["max_completion_tokens"] != 777.0 || got.body["temperature"] != 0.2 {
		t.Errorf("model %v, max_completion_tokens %v, temperature %v", got.body["model"], got.body["max_completion_tokens"], got.body["temperature"])
	}
	msgs := messages(t, got.body)
	if len(msgs) != 2 || msgs[0]["role"] != "system" || msgs[0]["content"] != llm.SystemPrompt(llm.TaskRoute).Text ||
		msgs[1]["role"] != "user" || !strings.Contains(msgs[1]["content"].(string), `"task": "rank the outlets"`) {
		t.Errorf("messages = %v", msgs)
	}
	rf, _ := got.body["response_format"].(map[string]any)
	js, _ := rf["json_schema"].(map[string]any)
	schema, _ := json.Marshal(js["schema"])
	if rf["type"] != "json_schema" || js["name"] != "route_output" || js["strict"] != false || !strings.Contains(string(schema), `"task_type"`) {
		t.Errorf("response_format = %v", rf)
	}
	if resp.Message.Content != `{"task_type":"general","pattern":"plan-then-execute","reason":"list and rank"}` ||
		resp.Model != "gpt-4.1-mini-2025-04-14" || resp.Provider != "openai" {
		t.Errorf("response = %+v", resp)
	}
	if resp.Usage != (llm.Usage{InputTokens: 412, OutputTokens: 31, CachedInputTokens: 128}) {
		t.Errorf("usage = %+v", resp.Usage)
	}
}

// TestToolCallRoundTrip: tools go out with their parameter schemas, an
// earlier tool call and its result go out as an assistant tool_calls
// message and a tool message, and the model's new tool call comes back
// with parsed arguments.
func TestToolCallRoundTrip(t *testing.T) {
	srv, url := newServer(t, reply{fixture: "chat_tool_call.json"})
	params := json.RawMessage(`{"type":"object","properties":{"outlet_ids":{"type":"array","items":{"type":"string"}}},"required":["outlet_ids"]}`)
	req := llm.NewRequest(llm.TaskAct, llm.ActInput{Task: "rank them"})
	req.Schema = llm.ActSchema
	req.Tools = []llm.Tool{{Name: "engagement_analytics", Description: "rank outlets", Parameters: params}}
	req.Messages = []llm.Message{
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_prev", Name: "outlet_list", Arguments: json.RawMessage(`{"status":"active"}`)}}},
		{Role: llm.RoleTool, ToolCallID: "call_prev", Content: `{"outlets":[]}`},
	}
	resp, err := newModel(t, url, 0).Complete(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	body := srv.requests()[0].body
	tools, _ := body["tools"].([]any)
	if len(tools) != 1 {
		t.Fatalf("tools = %v", body["tools"])
	}
	fn := tools[0].(map[string]any)["function"].(map[string]any)
	sentParams, _ := json.Marshal(fn["parameters"])
	if fn["name"] != "engagement_analytics" || !jsonEqual(sentParams, params) {
		t.Errorf("tool = %v", fn)
	}
	msgs := messages(t, body)
	calls, _ := msgs[2]["tool_calls"].([]any)
	if len(msgs) != 4 || msgs[2]["role"] != "assistant" || len(calls) != 1 || msgs[3]["role"] != "tool" || msgs[3]["tool_call_id"] != "call_prev" {
		t.Fatalf("messages = %v", msgs)
	}
	if f := calls[0].(map[string]any)["function"].(map[string]any); f["name"] != "outlet_list" || f["arguments"] != `{"status":"active"}` {
		t.Errorf("earlier tool call sent as %v", f)
	}
	if len(resp.Message.ToolCalls) != 1 {
		t.Fatalf("tool calls = %+v", resp.Message.ToolCalls)
	}
	c := resp.Message.ToolCalls[0]
	if c.ID != "call_Yk0vZ6Hq4Lm2" || c.Name != "engagement_analytics" || !jsonEqual(c.Arguments, json.RawMessage(`{"outlet_ids":["out-001","out-002"]}`)) {
		t.Errorf("tool call = %+v", c)
	}
}

// TestStreaming: with Stream set the request streams with usage included,
// deltas arrive in order, and the whole answer and usage come back.
func TestStreaming(t *testing.T) {
	srv, url := newServer(t, reply{fixture: "chat_stream.txt", sse: true})
	var deltas []string
	req := llm.NewRequest(llm.TaskSynthesize, llm.SynthInput{Task: "rank"})
	req.Stream = func(d string) { deltas = append(deltas, d) }
	resp, err := newModel(t, url, 0).Complete(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	body := srv.requests()[0].body
	if so, _ := body["stream_options"].(map[string]any); body["stream"] != true || so["include_usage"] != true {
		t.Errorf("stream %v, stream_options %v", body["stream"], body["stream_options"])
	}
	want := "1. Central Station (out-002)\n2. Market Lane (out-005)"
	if strings.Join(deltas, "|") != "1. Central |Station (out-002)|\n2. Market Lane| (out-005)" || resp.Message.Content != want {
		t.Errorf("deltas %q, content %q", deltas, resp.Message.Content)
	}
	if resp.Usage != (llm.Usage{InputTokens: 980, OutputTokens: 140, CachedInputTokens: 512}) || resp.Model != "gpt-4.1-mini-2025-04-14" {
		t.Errorf("usage %+v, model %q", resp.Usage, resp.Model)
	}
}

// TestStreamingToolCall: a tool call streamed in argument fragments is
// accumulated whole.
func TestStreamingToolCall(t *testing.T) {
	_, url := newServer(t, reply{fixture: "chat_stream_tool_call.txt", sse: true})
	req := llm.NewRequest(llm.TaskAct, llm.ActInput{Task: "list"})
	req.Stream = func(string) {}
	resp, err := newModel(t, url, 0).Complete(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Message.ToolCalls) != 1 || resp.Message.ToolCalls[0].Name != "outlet_list" ||
		string(resp.Message.ToolCalls[0].Arguments) != `{"status":"active"}` || resp.Usage.InputTokens != 700 {
		t.Fatalf("response = %+v", resp)
	}
}

// TestRetryAfterIsHonoured: a 429 with Retry-After: 1 is retried about a
// second later, and the retry's answer is the result.
func TestRetryAfterIsHonoured(t *testing.T) {
	srv, url := newServer(t, reply{status: 429, headers: map[string]string{"Retry-After": "1"}}, reply{fixture: "chat_structured.json"})
	resp, err := newModel(t, url, 2).Complete(ctx(t), llm.NewRequest(llm.TaskRoute, llm.RouteInput{Task: "x"}))
	if err != nil {
		t.Fatal(err)
	}
	reqs := srv.requests()
	if len(reqs) != 2 || resp.Usage.InputTokens != 412 {
		t.Fatalf("%d requests, usage %+v", len(reqs), resp.Usage)
	}
	if gap := reqs[1].at.Sub(reqs[0].at); gap < 900*time.Millisecond || gap > 5*time.Second {
		t.Errorf("retried after %v, want about the 1 s of Retry-After", gap)
	}
}

// TestProviderFailuresAreUnavailable: a provider still failing after its
// retries, or refusing the key, is llm.ErrUnavailable; the error names the
// status but never the key. The caller's own cancellation is not.
func TestProviderFailuresAreUnavailable(t *testing.T) {
	fast := map[string]string{"retry-after-ms": "1"} // no real backoff in the test
	cases := []struct {
		name    string
		reply   reply
		retries int
		want    int // requests made
		status  string
	}{
		{"500 until the retries are spent", reply{status: 500, headers: fast}, 2, 3, "500"},
		{"401 bad key", reply{status: 401}, 2, 1, "401"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, url := newServer(t, tc.reply)
			_, err := newModel(t, url, tc.retries).Complete(ctx(t), llm.NewRequest(llm.TaskRoute, llm.RouteInput{Task: "x"}))
			if !errors.Is(err, llm.ErrUnavailable) || !strings.Contains(err.Error(), tc.status) {
				t.Fatalf("err = %v, want ErrUnavailable naming %s", err, tc.status)
			}
			if n := len(srv.requests()); n != tc.want {
				t.Errorf("%d requests, want %d", n, tc.want)
			}
			for _, s := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
				if strings.Contains(s, testKey) {
					t.Fatalf("the error holds the key: %s", s)
				}
			}
		})
	}
	t.Run("connection refused", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL + "/v1"
		srv.Close()
		_, err := newModel(t, url, -1).Complete(ctx(t), llm.NewRequest(llm.TaskRoute, llm.RouteInput{Task: "x"}))
		if !errors.Is(err, llm.ErrUnavailable) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("caller cancelled", func(t *testing.T) {
		_, url := newServer(t, reply{status: 500, headers: fast})
		c, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := newModel(t, url, 2).Complete(c, llm.NewRequest(llm.TaskRoute, llm.RouteInput{Task: "x"}))
		if !errors.Is(err, context.Canceled) || errors.Is(err, llm.ErrUnavailable) {
			t.Fatalf("err = %v, want context.Canceled only", err)
		}
	})
}

// TestInvalidToolArgumentsStayJSON: arguments that are not JSON come back
// as a JSON string, so the executor's schema check rejects them cleanly.
func TestInvalidToolArgumentsStayJSON(t *testing.T) {
	body := strings.Replace(mustRead(t, "chat_tool_call.json"), `"{\"outlet_ids\":[\"out-001\",\"out-002\"]}"`, `"outlet_ids=out-001"`, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}))
	defer srv.Close()
	resp, err := newModel(t, srv.URL+"/v1", 0).Complete(ctx(t), llm.NewRequest(llm.TaskAct, llm.ActInput{Task: "x"}))
	if err != nil {
		t.Fatal(err)
	}
	if args := resp.Message.ToolCalls[0].Arguments; string(args) != `"outlet_ids=out-001"` {
		t.Fatalf("arguments = %s", args)
	}
}

// The embedder is the store's: what the projector embeds exchanges with.
var _ store.Embedder = (*openai.Embedder)(nil)

func TestEmbeddings(t *testing.T) {
	srv, url := newServer(t, reply{fixture: "embeddings.json"})
	e, err := openai.NewEmbedder(llm.ProviderConfig{Model: "text-embedding-3-small", BaseURL: url, APIKey: testKey}, 4)
	if err != nil {
		t.Fatal(err)
	}
	vecs, err := e.Embed(ctx(t), []string{"outlet engagement", "menu items"})
	if err != nil {
		t.Fatal(err)
	}
	got := srv.requests()[0]
	input, _ := got.body["input"].([]any)
	if got.path != "/v1/embeddings" || got.body["model"] != "text-embedding-3-small" || got.body["dimensions"] != 4.0 ||
		len(input) != 2 || input[1] != "menu items" || got.header.Get("Authorization") != "Bearer "+testKey {
		t.Errorf("request %s %v", got.path, got.body)
	}
	if len(vecs) != 2 || vecs[0][1] != -0.5 || vecs[1][3] != 0.75 || e.Dimension() != 4 {
		t.Errorf("vectors = %v", vecs)
	}
	wrong, _ := openai.NewEmbedder(llm.ProviderConfig{Model: "text-embedding-3-small", BaseURL: url, APIKey: testKey}, 8)
	if _, err := wrong.Embed(ctx(t), []string{"a", "b"}); err == nil || !strings.Contains(err.Error(), "dimensions") {
		t.Errorf("a wrong-dimension embedding: err = %v", err)
	}
}

func mustRead(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

// TestAgentSettingsReachTheBody: a call made through an agent's settings
// sends its temperature (over the configured one), top_p, stop sequences
// and a max_completion_tokens lowered to the agent's; the agent's model
// is sent when it is the configured model or aliased, the configured
// model otherwise.
func TestAgentSettingsReachTheBody(t *testing.T) {
	srv, url := newServer(t, reply{fixture: "chat_tool_call.json"})
	m, err := openai.New(llm.ProviderConfig{Model: "gpt-4.1-mini", BaseURL: url, APIKey: testKey, MaxTokens: 777,
		MaxRetries: -1, Models: map[string]string{"smart": "gpt-4.1"}})
	if err != nil {
		t.Fatal(err)
	}
	temp, topP := 0.9, 0.6
	for _, tc := range []struct{ asked, sent string }{{"smart", "gpt-4.1"}, {"gpt-4.1-mini", "gpt-4.1-mini"}, {"claude-x", "gpt-4.1-mini"}} {
		am := llm.WithSettings(m, llm.Settings{Model: tc.asked, Temperature: &temp, MaxTokens: 123, TopP: &topP, Stop: []string{"<end>"}})
		if _, err := am.Complete(ctx(t), llm.NewRequest(llm.TaskAct, llm.ActInput{Task: "rank"})); err != nil {
			t.Fatal(err)
		}
		reqs := srv.requests()
		b := reqs[len(reqs)-1].body
		if b["model"] != tc.sent || b["temperature"] != 0.9 || b["top_p"] != 0.6 || b["max_completion_tokens"] != 123.0 {
			t.Errorf("asked %s: body = %v", tc.asked, b)
		}
		if stop, _ := b["stop"].([]any); len(stop) != 1 || stop[0] != "<end>" {
			t.Errorf("stop = %v", b["stop"])
		}
	}
	// Without settings the configured model and limit go out, and no
	// sampling field the deployment did not set.
	if _, err := llm.WithSettings(m, llm.Settings{}).Complete(ctx(t), llm.NewRequest(llm.TaskAct, llm.ActInput{Task: "rank"})); err != nil {
		t.Fatal(err)
	}
	reqs := srv.requests()
	if b := reqs[len(reqs)-1].body; b["model"] != "gpt-4.1-mini" || b["max_completion_tokens"] != 777.0 || b["temperature"] != nil || b["top_p"] != nil || b["stop"] != nil {
		t.Errorf("no settings: body = %v", b)
	}
}
