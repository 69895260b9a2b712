package anthropic_test

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
	"github.com/agentbus/agentbus/llm/anthropic"
)

const testKey = "sk-ant-test-7d2c90b1e4f35a68"

// fakeServer answers with the replies handed to it in order (the last
// repeats) and records each request.
type fakeServer struct {
	t       *testing.T
	mu      sync.Mutex
	replies []reply
	reqs    []recorded
}

type reply struct {
	status  int
	headers map[string]string
	fixture string // a file under testdata, or "" for an error body
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
	return f, srv.URL
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
		fmt.Fprintf(w, `{"type":"error","error":{"type":"api_error","message":"scripted failure %d"}}`, rep.status)
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
	_, _ = w.Write(data)
}

func (f *fakeServer) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

func newModel(t *testing.T, url string, retries int) *anthropic.Model {
	t.Helper()
	temp := 0.3
	m, err := anthropic.New(llm.ProviderConfig{Model: "claude-sonnet-4-20250514", BaseURL: url, APIKey: testKey,
		MaxTokens: 900, Temperature: &temp, MaxRetries: retries, Timeout: 10 * time.Second})
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

func list(v any) []map[string]any {
	raw, _ := v.([]any)
	var out []map[string]any
	for _, x := range raw {
		out = append(out, x.(map[string]any))
	}
	return out
}

// TestStructuredOutputByToolForcing: a schema'd request goes out with the
// key, version header, model, token limit, temperature and system prompt,
// and a "respond" tool whose input schema is the answer's, forced by
// tool_choice; the tool's input comes back as the content, with usage
// counting cached and cache-writing tokens as input.
func TestStructuredOutputByToolForcing(t *testing.T) {
	srv, url := newServer(t, reply{fixture: "message_respond.json"})
	req := llm.NewRequest(llm.TaskRoute, llm.RouteInput{Task: "rank the outlets"})
	req.Schema = llm.RouteSchema
	resp, err := newModel(t, url, 0).Complete(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	got := srv.requests()[0]
	if got.path != "/v1/messages" || got.header.Get("X-Api-Key") != testKey || got.header.Get("Anthropic-Version") == "" {
		t.Errorf("sent to %s, x-api-key %q, anthropic-version %q", got.path, got.header.Get("X-Api-Key"), got.header.Get("Anthropic-Version"))
	}
	if got.body["model"] != "claude-sonnet-4-20250514" || got.body["max_tokens"] != 900.0 || got.body["temperature"] != 0.3 {
		t.Errorf("model %v, max_tokens %v, temperature %v", got.body["model"], got.body["max_tokens"], got.body["temperature"])
	}
	if sys := list(got.body["system"]); len(sys) != 1 || sys[0]["text"] != llm.SystemPrompt(llm.TaskRoute).Text {
		t.Errorf("system = %v", got.body["system"])
	}
	tools := list(got.body["tools"])
	choice, _ := got.body["tool_choice"].(map[string]any)
	if len(tools) != 1 || tools[0]["name"] != "respond" || choice["type"] != "tool" || choice["name"] != "respond" {
		t.Fatalf("tools %v, tool_choice %v", tools, choice)
	}
	schema := tools[0]["input_schema"].(map[string]any)
	if schema["type"] != "object" || fmt.Sprint(schema["required"]) != "[task_type pattern]" || schema["properties"].(map[string]any)["task_type"] == nil {
		t.Errorf("input_schema = %v", schema)
	}
	msgs := list(got.body["messages"])
	if len(msgs) != 1 || msgs[0]["role"] != "user" || !strings.Contains(fmt.Sprint(msgs[0]["content"]), "rank the outlets") {
		t.Errorf("messages = %v", msgs)
	}
	var out llm.RouteOutput
	if err := json.Unmarshal([]byte(resp.Message.Content), &out); err != nil || out.Pattern != "plan-then-execute" || len(resp.Message.ToolCalls) != 0 {
		t.Fatalf("content %q, tool calls %v", resp.Message.Content, resp.Message.ToolCalls)
	}
	if resp.Usage != (llm.Usage{InputTokens: 540, OutputTokens: 45, CachedInputTokens: 200}) || resp.Provider != "anthropic" || resp.Model != "claude-sonnet-4-20250514" {
		t.Errorf("usage %+v, provider %q, model %q", resp.Usage, resp.Provider, resp.Model)
	}
}

// TestToolUseRoundTrip: skill tools go out with their schemas beside the
// respond tool, tool_choice any; an earlier tool call and its result go
// out as tool_use and tool_result blocks; a skill call comes back as a
// tool call.
func TestToolUseRoundTrip(t *testing.T) {
	srv, url := newServer(t, reply{fixture: "message_tool_use.json"})
	req := llm.NewRequest(llm.TaskAct, llm.ActInput{Task: "rank them"})
	req.Schema = llm.ActSchema
	req.Tools = []llm.Tool{{Name: "engagement_analytics", Description: "rank outlets",
		Parameters: json.RawMessage(`{"type":"object","properties":{"outlet_ids":{"type":"array","items":{"type":"string"}}},"required":["outlet_ids"],"additionalProperties":false}`)}}
	req.Messages = []llm.Message{
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "toolu_prev", Name: "outlet_list", Arguments: json.RawMessage(`{"status":"active"}`)}}},
		{Role: llm.RoleTool, ToolCallID: "toolu_prev", Content: "boom", IsError: true},
	}
	resp, err := newModel(t, url, 0).Complete(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	body := srv.requests()[0].body
	tools := list(body["tools"])
	if choice, _ := body["tool_choice"].(map[string]any); len(tools) != 2 || tools[0]["name"] != "engagement_analytics" || tools[1]["name"] != "respond" || choice["type"] != "any" {
		t.Fatalf("tools %v, tool_choice %v", tools, body["tool_choice"])
	}
	if schema := tools[0]["input_schema"].(map[string]any); schema["additionalProperties"] != false || fmt.Sprint(schema["required"]) != "[outlet_ids]" {
		t.Errorf("skill input_schema = %v", schema)
	}
	msgs := list(body["messages"])
	if len(msgs) != 3 || msgs[1]["role"] != "assistant" || msgs[2]["role"] != "user" {
		t.Fatalf("messages = %v", msgs)
	}
	use := list(msgs[1]["content"])[0]
	result := list(msgs[2]["content"])[0]
	if use["type"] != "tool_use" || use["id"] != "toolu_prev" || use["name"] != "outlet_list" ||
		result["type"] != "tool_result" || result["tool_use_id"] != "toolu_prev" || result["is_error"] != true {
		t.Errorf("tool_use %v, tool_result %v", use, result)
	}
	if len(resp.Message.ToolCalls) != 1 || resp.Message.ToolCalls[0].Name != "engagement_analytics" ||
		string(resp.Message.ToolCalls[0].Arguments) != `{"outlet_ids":["out-001","out-002"]}` {
		t.Fatalf("tool calls = %+v", resp.Message.ToolCalls)
	}
}

// TestStreaming: text deltas arrive in order, and the whole message and
// its usage (from message_start and message_delta) come back.
func TestStreaming(t *testing.T) {
	srv, url := newServer(t, reply{fixture: "message_stream.txt", sse: true})
	var deltas []string
	req := llm.NewRequest(llm.TaskSynthesize, llm.SynthInput{Task: "rank"})
	req.Stream = func(d string) { deltas = append(deltas, d) }
	resp, err := newModel(t, url, 0).Complete(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if srv.requests()[0].body["stream"] != true {
		t.Errorf("the request did not ask to stream")
	}
	if strings.Join(deltas, "|") != "1. Central |Station (out-002)|\n2. Market Lane| (out-005)" ||
		resp.Message.Content != "1. Central Station (out-002)\n2. Market Lane (out-005)" {
		t.Errorf("deltas %q, content %q", deltas, resp.Message.Content)
	}
	if resp.Usage != (llm.Usage{InputTokens: 1492, OutputTokens: 140, CachedInputTokens: 512}) {
		t.Errorf("usage = %+v", resp.Usage)
	}
}

// TestRetryAfterIsHonoured: a 429 with Retry-After: 1 is retried about a
// second later.
func TestRetryAfterIsHonoured(t *testing.T) {
	srv, url := newServer(t, reply{status: 429, headers: map[string]string{"Retry-After": "1"}}, reply{fixture: "message_respond.json"})
	req := llm.NewRequest(llm.TaskRoute, llm.RouteInput{Task: "x"})
	req.Schema = llm.RouteSchema
	if _, err := newModel(t, url, 2).Complete(ctx(t), req); err != nil {
		t.Fatal(err)
	}
	reqs := srv.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	if gap := reqs[1].at.Sub(reqs[0].at); gap < 900*time.Millisecond || gap > 5*time.Second {
		t.Errorf("retried after %v, want about the 1 s of Retry-After", gap)
	}
}

// TestProviderFailuresAreUnavailable: 5xx until the retries are spent is
// llm.ErrUnavailable naming the status, never the key; the caller's own
// cancellation is not.
func TestProviderFailuresAreUnavailable(t *testing.T) {
	srv, url := newServer(t, reply{status: 500, headers: map[string]string{"retry-after-ms": "1"}})
	_, err := newModel(t, url, 2).Complete(ctx(t), llm.NewRequest(llm.TaskRoute, llm.RouteInput{Task: "x"}))
	if !errors.Is(err, llm.ErrUnavailable) || !strings.Contains(err.Error(), "500") {
		t.Fatalf("err = %v", err)
	}
	if n := len(srv.requests()); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
	for _, s := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
		if strings.Contains(s, testKey) {
			t.Fatalf("the error holds the key: %s", s)
		}
	}
	c, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = newModel(t, url, 2).Complete(c, llm.NewRequest(llm.TaskRoute, llm.RouteInput{Task: "x"}))
	if !errors.Is(err, context.Canceled) || errors.Is(err, llm.ErrUnavailable) {
		t.Fatalf("cancelled: err = %v", err)
	}
}

// TestBedrockInvokeSignedWithSigV4: the Bedrock model posts the Messages
// body in Bedrock's invoke shape (anthropic_version, no model or stream
// field) to /model/<id>/invoke, signed with SigV4 by credentials from the
// standard AWS chain, and never sends the secret key.
func TestBedrockInvokeSignedWithSigV4(t *testing.T) {
	const access, secret = "AKIAAGENTBUSTEST0001", "agentbus/test/secret+key/0123456789abcdefXYZ"
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": access, "AWS_SECRET_ACCESS_KEY": secret, "AWS_REGION": "eu-west-1",
		"AWS_CONFIG_FILE": empty, "AWS_SHARED_CREDENTIALS_FILE": empty, "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_SESSION_TOKEN": "", "AWS_PROFILE": "", "AWS_BEARER_TOKEN_BEDROCK": ""} {
		t.Setenv(k, v)
	}
	srv, url := newServer(t, reply{fixture: "message_tool_use.json"})
	m, err := anthropic.NewBedrock(ctx(t), llm.ProviderConfig{Model: "anthropic.claude-3-5-haiku-20241022-v1:0", BaseURL: url, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := m.Complete(ctx(t), llm.NewRequest(llm.TaskAct, llm.ActInput{Task: "rank"}))
	if err != nil {
		t.Fatal(err)
	}
	got := srv.requests()[0]
	if got.path != "/model/anthropic.claude-3-5-haiku-20241022-v1:0/invoke" {
		t.Errorf("path = %s", got.path)
	}
	if got.body["anthropic_version"] != "bedrock-2023-05-31" || got.body["model"] != nil || got.body["stream"] != nil || got.body["max_tokens"] == nil {
		t.Errorf("body = %v", got.body)
	}
	auth := got.header.Get("Authorization")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential="+access+"/") || !strings.Contains(auth, "/eu-west-1/bedrock/aws4_request") ||
		!strings.Contains(auth, "Signature=") || got.header.Get("X-Amz-Date") == "" {
		t.Errorf("authorization = %q, x-amz-date %q", auth, got.header.Get("X-Amz-Date"))
	}
	for k, v := range got.header {
		if strings.Contains(strings.Join(v, ","), secret) {
			t.Fatalf("header %s holds the secret key", k)
		}
	}
	if resp.Provider != "bedrock" || len(resp.Message.ToolCalls) != 1 {
		t.Errorf("response = %+v", resp)
	}
}

// TestAgentSettingsReachTheBody: a call made through an agent's settings
// sends its temperature (over the configured one), top_p, stop sequences
// and a max_tokens lowered to the agent's; the agent's model is sent when
// the alias map serves it, and the configured model when nothing does.
func TestAgentSettingsReachTheBody(t *testing.T) {
	srv, url := newServer(t, reply{fixture: "message_tool_use.json"})
	temp := 0.3
	m, err := anthropic.New(llm.ProviderConfig{Model: "claude-sonnet-4-20250514", BaseURL: url, APIKey: testKey,
		MaxTokens: 900, Temperature: &temp, MaxRetries: -1, Models: map[string]string{"fast": "claude-3-5-haiku-latest"}})
	if err != nil {
		t.Fatal(err)
	}
	agentTemp, topP := 0.7, 0.85
	for _, tc := range []struct{ asked, sent string }{{"fast", "claude-3-5-haiku-latest"}, {"gpt-9", "claude-sonnet-4-20250514"}} {
		am := llm.WithSettings(m, llm.Settings{Model: tc.asked, Temperature: &agentTemp, MaxTokens: 321, TopP: &topP, Stop: []string{"END", "###"}})
		if _, err := am.Complete(ctx(t), llm.NewRequest(llm.TaskAct, llm.ActInput{Task: "rank"})); err != nil {
			t.Fatal(err)
		}
		reqs := srv.requests()
		b := reqs[len(reqs)-1].body
		if b["model"] != tc.sent || b["temperature"] != 0.7 || b["top_p"] != 0.85 || b["max_tokens"] != float64(321) {
			t.Errorf("asked %s: body = %v", tc.asked, b)
		}
		if stop, _ := b["stop_sequences"].([]any); len(stop) != 2 || stop[0] != "END" || stop[1] != "###" {
			t.Errorf("stop_sequences = %v", b["stop_sequences"])
		}
	}
}

// TestBedrockSendsAgentSettings: on Bedrock the agent's settings ride in
// the invoke body, and an aliased model goes into the invoke path.
func TestBedrockSendsAgentSettings(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "AKIAAGENTBUSTEST0002", "AWS_SECRET_ACCESS_KEY": "agentbus/test/secret", "AWS_REGION": "eu-west-1",
		"AWS_CONFIG_FILE": empty, "AWS_SHARED_CREDENTIALS_FILE": empty, "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_SESSION_TOKEN": "", "AWS_PROFILE": "", "AWS_BEARER_TOKEN_BEDROCK": ""} {
		t.Setenv(k, v)
	}
	srv, url := newServer(t, reply{fixture: "message_tool_use.json"})
	m, err := anthropic.NewBedrock(ctx(t), llm.ProviderConfig{Model: "anthropic.claude-3-5-haiku-20241022-v1:0", BaseURL: url, MaxRetries: -1,
		Models: map[string]string{"claude-sonnet": "anthropic.claude-sonnet-4-20250514-v1:0"}})
	if err != nil {
		t.Fatal(err)
	}
	temp, topP := 0.2, 0.5
	am := llm.WithSettings(m, llm.Settings{Model: "claude-sonnet", Temperature: &temp, MaxTokens: 77, TopP: &topP, Stop: []string{"STOP"}})
	if _, err := am.Complete(ctx(t), llm.NewRequest(llm.TaskAct, llm.ActInput{Task: "rank"})); err != nil {
		t.Fatal(err)
	}
	got := srv.requests()[0]
	if got.path != "/model/anthropic.claude-sonnet-4-20250514-v1:0/invoke" {
		t.Errorf("path = %s", got.path)
	}
	b := got.body
	if b["temperature"] != 0.2 || b["top_p"] != 0.5 || b["max_tokens"] != float64(77) {
		t.Errorf("body = %v", b)
	}
	if stop, _ := b["stop_sequences"].([]any); len(stop) != 1 || stop[0] != "STOP" {
		t.Errorf("stop_sequences = %v", b["stop_sequences"])
	}
}
