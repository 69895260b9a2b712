package openai_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/openai"
)

// server is what an OpenAI-compatible server takes, and how it refuses
// what it does not. The presets below are the servers agentbus meets.
type server struct {
	formats    map[string]bool // response_format types taken ("text" is always taken)
	autoTools  string          // tools with tool_choice auto: "native", "ignore" or "refuse"
	namedTools bool            // a named tool_choice forces that function (with a grammar)
	refusal    int             // the status of a refusal
	refuseText string          // its message
	// down, when set, answers that status to the first down requests.
	down, downFor int
	// say, when set, is the model's text in place of answer's.
	say func() string
}

// llamaCppPython is llama-cpp-python's server: response_format text or
// json_object (a "schema" field becomes a grammar), json_schema answered
// 500 by the chat handler; tools with tool_choice auto are ignored (the
// chat template has no tools), a named tool_choice forces that function.
func llamaCppPython() server {
	return server{formats: map[string]bool{"json_object": true}, autoTools: "ignore", namedTools: true, refusal: 500,
		refuseText: "'json_schema' is not one of ['text', 'json_object']"}
}

// bareServer takes no response_format, no tools: only the prompt.
func bareServer() server {
	return server{autoTools: "refuse", refusal: 400, refuseText: "Unrecognized request argument supplied"}
}

// forcingServer takes named tool choice only (vLLM without a tool parser
// and without guided JSON modes).
func forcingServer() server {
	return server{autoTools: "refuse", namedTools: true, refusal: 422,
		refuseText: `"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set`}
}

// fullServer is OpenAI: everything.
func fullServer() server {
	return server{formats: map[string]bool{"json_object": true, "json_schema": true}, autoTools: "native", namedTools: true, refusal: 400}
}

const (
	routeAnswer = `{"task_type":"general","pattern":"plan-then-execute"}`
	actCall     = `{"tool_call":{"name":"outlet_list","arguments":{"status":"active"}}}`
	actAnswer   = `{"status":"complete","label":"outlets","data":["out-001"]}`
)

// modal is a running server with its received requests.
type modal struct {
	server
	URL  string
	mu   sync.Mutex
	reqs []map[string]any
}

func startServer(t *testing.T, s server) *modal {
	m := &modal{server: s}
	srv := httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(srv.Close)
	m.URL = srv.URL + "/v1"
	return m
}

func (m *modal) requests() []map[string]any {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]map[string]any(nil), m.reqs...)
}

func (m *modal) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		writeError(w, 400, "not JSON")
		return
	}
	m.mu.Lock()
	m.reqs = append(m.reqs, body)
	n := len(m.reqs)
	m.mu.Unlock()
	if n <= m.downFor {
		writeError(w, m.down, "the server is overloaded")
		return
	}
	if why := m.refuses(body); why != "" {
		writeError(w, m.refusal, why)
		return
	}
	msg := map[string]any{"role": "assistant", "content": m.answer(body)}
	if choice, _ := body["tool_choice"].(map[string]any); choice != nil {
		name := choice["function"].(map[string]any)["name"]
		msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "call_forced", "type": "function",
			"function": map[string]any{"name": name, "arguments": m.answer(body)}}}}
	} else if _, has := body["tools"]; has && m.autoTools == "native" && !answered(body) {
		msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "call_native", "type": "function",
			"function": map[string]any{"name": "outlet_list", "arguments": `{"status":"active"}`}}}}
	}
	writeCompletion(w, body, msg)
}

// refuses says why the server turns the request down, or "".
func (m *modal) refuses(body map[string]any) string {
	if rf, ok := body["response_format"].(map[string]any); ok && rf["type"] != "text" && !m.formats[fmt.Sprint(rf["type"])] {
		return fmt.Sprintf("response_format %v: %s", rf["type"], m.refuseText)
	}
	choice, named := body["tool_choice"].(map[string]any)
	if _, has := body["tools"]; has && ((named && !m.namedTools) || (!named && m.autoTools == "refuse")) {
		return "tools: " + m.refuseText
	}
	_ = choice
	return ""
}

// answered reports whether the conversation already holds a tool result
// (as a tool message, or as text for a server without tools).
func answered(body map[string]any) bool {
	msgs, _ := body["messages"].([]any)
	for _, raw := range msgs {
		msg := raw.(map[string]any)
		if c, _ := msg["content"].(string); msg["role"] == "tool" || strings.HasPrefix(c, "Result of tool call") {
			return true
		}
	}
	return false
}

// answer is the text the model writes: what the request's schema (as a
// response format, a forced function, or in the prompt) asks for.
func (m *modal) answer(body map[string]any) string {
	if m.say != nil {
		return m.say()
	}
	all, _ := json.Marshal(body)
	switch {
	case !strings.Contains(string(all), "status") && strings.Contains(string(all), "task_type"):
		return routeAnswer
	case strings.Contains(string(all), "tool_call") && !answered(body):
		return actCall
	}
	return actAnswer
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": nil, "code": nil}})
	_, _ = w.Write(b)
}

func writeCompletion(w http.ResponseWriter, body, msg map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	finish := "stop"
	if msg["tool_calls"] != nil {
		finish = "tool_calls"
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "created": time.Now().Unix(),
		"model": body["model"], "choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage": map[string]any{"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}})
}

func modelOf(t *testing.T, url, id string) *openai.Model {
	t.Helper()
	m, err := openai.New(llm.ProviderConfig{Model: id, BaseURL: url, APIKey: "local", MaxRetries: 2, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func routeRequest() llm.Request {
	req := llm.NewRequest(llm.TaskRoute, llm.RouteInput{Task: "rank the outlets", TaskTypes: []llm.TaskType{{Name: "general"}}})
	req.Schema = llm.RouteSchema
	return req
}

func actRequest(turns ...llm.Message) llm.Request {
	req := llm.NewRequest(llm.TaskAct, llm.ActInput{Task: "list the active outlets"})
	req.Schema = llm.ActSchema
	req.Tools = []llm.Tool{
		{Name: "outlet_list", Description: "list outlets", Parameters: json.RawMessage(`{"type":"object","properties":{"status":{"enum":["active","closed"]}}}`)},
		{Name: "menu_catalog", Description: "the menu", Parameters: json.RawMessage(`{"type":"object"}`)},
	}
	req.Messages = turns
	return req
}

func formatOf(body map[string]any) string {
	rf, _ := body["response_format"].(map[string]any)
	return fmt.Sprint(rf["type"])
}

// TestLadderStepsDownAndRemembers: against llama-cpp-python's server, a
// request with a schema is refused as json_schema (500) and answered as
// json_object, with the schema in the prompt and in the format; the mode
// is remembered for the server and model, by every Model of the process,
// and a second call goes straight to it. Another model of the same server
// starts from the top.
func TestLadderStepsDownAndRemembers(t *testing.T) {
	srv := startServer(t, llamaCppPython())
	rec := llm.Record(modelOf(t, srv.URL, "smollm2"))
	var out llm.RouteOutput
	if _, err := llm.Structured(ctx(t), rec, routeRequest(), &out); err != nil {
		t.Fatal(err)
	}
	reqs := srv.requests()
	if len(reqs) != 2 || formatOf(reqs[0]) != "json_schema" || formatOf(reqs[1]) != "json_object" {
		t.Fatalf("formats sent: %d requests %v", len(reqs), reqs)
	}
	rf := reqs[1]["response_format"].(map[string]any)
	if schema, _ := json.Marshal(rf["schema"]); !strings.Contains(string(schema), `"task_type"`) {
		t.Errorf("json_object carries no schema: %v", rf)
	}
	if msgs := messages(t, reqs[1]); !strings.Contains(msgs[1]["content"].(string), "valid against this JSON Schema") {
		t.Errorf("the prompt does not state the schema: %v", msgs[1])
	}
	if out.TaskType != "general" || rec.Calls()[0].StructuredMode != "json_object" {
		t.Errorf("answer %+v, recorded %+v", out, rec.Calls())
	}
	if mode, ok := openai.ModeOf(srv.URL, "smollm2", false); mode != openai.ModeJSONObject || !ok {
		t.Errorf("remembered %s %v", mode, ok)
	}
	other := modelOf(t, srv.URL, "smollm2") // another role's model of the same server
	if resp, err := other.Complete(ctx(t), routeRequest()); err != nil || resp.StructuredMode != "json_object" {
		t.Fatalf("second call: %v, mode %q", err, resp.StructuredMode)
	}
	if reqs := srv.requests(); len(reqs) != 3 || formatOf(reqs[2]) != "json_object" {
		t.Errorf("the second call did not go straight to json_object: %d requests", len(reqs))
	}
	if _, err := modelOf(t, srv.URL, "qwen").Complete(ctx(t), routeRequest()); err != nil {
		t.Fatal(err)
	}
	if reqs := srv.requests(); formatOf(reqs[3]) != "json_schema" {
		t.Errorf("another model started at %s", formatOf(reqs[3]))
	}
}

// TestToolsWithoutNativeSupport: against llama-cpp-python, a tools
// request is asked as a JSON envelope (no tools field, the tools in the
// prompt and the format's schema); the envelope's tool call comes back as
// a tool call, the earlier turns go out as text, and the final answer as
// content.
func TestToolsWithoutNativeSupport(t *testing.T) {
	srv := startServer(t, llamaCppPython())
	m := modelOf(t, srv.URL, "smollm2")
	resp, err := m.Complete(ctx(t), actRequest())
	if err != nil {
		t.Fatal(err)
	}
	reqs := srv.requests()
	if len(reqs) != 2 || formatOf(reqs[1]) != "json_object" || reqs[1]["tools"] != nil || resp.StructuredMode != "json_object" {
		t.Fatalf("%d requests, second %v, mode %q", len(reqs), reqs[len(reqs)-1], resp.StructuredMode)
	}
	schema, _ := json.Marshal(reqs[1]["response_format"].(map[string]any)["schema"])
	if !strings.Contains(string(schema), `"const":"outlet_list"`) || !strings.Contains(string(schema), `"closed"`) {
		t.Errorf("the envelope schema lacks the tools: %s", schema)
	}
	if first := messages(t, reqs[1])[1]["content"].(string); !strings.Contains(first, `{"tool_call": {"name"`) {
		t.Errorf("the prompt does not say how to call a tool: %.200s", first)
	}
	if len(resp.Message.ToolCalls) != 1 || resp.Message.ToolCalls[0].Name != "outlet_list" ||
		string(resp.Message.ToolCalls[0].Arguments) != `{"status":"active"}` || !strings.HasPrefix(resp.Message.ToolCalls[0].ID, "call_") {
		t.Fatalf("tool calls = %+v", resp.Message)
	}
	c := resp.Message.ToolCalls[0]
	resp, err = m.Complete(ctx(t), actRequest(resp.Message, llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, Content: `{"outlets":["out-001"]}`}))
	if err != nil {
		t.Fatal(err)
	}
	last := srv.requests()[2]
	if len(srv.requests()) != 3 || formatOf(last) != "json_object" {
		t.Fatalf("the follow-up went out as %s", formatOf(last))
	}
	msgs := messages(t, last)
	if msgs[2]["role"] != "assistant" || msgs[2]["content"] != `{"tool_call":{"name":"outlet_list","arguments":{"status":"active"}}}` ||
		msgs[3]["role"] != "user" || !strings.Contains(msgs[3]["content"].(string), c.ID) || msgs[2]["tool_calls"] != nil {
		t.Errorf("tool turns as text: %v", msgs[2:])
	}
	if resp.Message.Content != actAnswer || len(resp.Message.ToolCalls) != 0 {
		t.Errorf("final answer = %+v", resp.Message)
	}
}

// TestToolForcing: a server that takes neither response format but a
// named tool choice is asked through one forced function, for a schema
// (its arguments are the answer) and for tools (the envelope); a tools
// request starts where schema requests settled.
func TestToolForcing(t *testing.T) {
	srv := startServer(t, forcingServer())
	rec := llm.Record(modelOf(t, srv.URL, "local"))
	var out llm.RouteOutput
	if _, err := llm.Structured(ctx(t), rec, routeRequest(), &out); err != nil {
		t.Fatal(err)
	}
	reqs := srv.requests()
	if len(reqs) != 3 || formatOf(reqs[1]) != "json_object" || reqs[2]["response_format"] != nil {
		t.Fatalf("%d requests: %v", len(reqs), reqs)
	}
	tools, _ := reqs[2]["tools"].([]any)
	fn := tools[0].(map[string]any)["function"].(map[string]any)
	choice := reqs[2]["tool_choice"].(map[string]any)["function"].(map[string]any)
	if len(tools) != 1 || fn["name"] != "respond" || choice["name"] != "respond" || out.TaskType != "general" {
		t.Errorf("forced %v with %v; answer %+v", fn["name"], choice, out)
	}
	if c := rec.Calls(); len(c) != 1 || c[0].StructuredMode != "tool_forcing" {
		t.Errorf("recorded %+v", c)
	}
	resp, err := rec.Complete(ctx(t), actRequest())
	if err != nil {
		t.Fatal(err)
	}
	if reqs := srv.requests(); len(reqs) != 4 || resp.StructuredMode != "tool_forcing" || len(resp.Message.ToolCalls) != 1 ||
		resp.Message.ToolCalls[0].Name != "outlet_list" {
		t.Errorf("%d requests, response %+v", len(reqs), resp)
	}
}

// TestPromptOnly: a server that refuses every response format and tools
// is asked in the prompt alone; the answer is validated (and repaired) by
// llm.Structured, and the mode is recorded with each call.
func TestPromptOnly(t *testing.T) {
	srv := startServer(t, bareServer())
	rec := llm.Record(modelOf(t, srv.URL, "bare"))
	var out llm.RouteOutput
	if _, err := llm.Structured(ctx(t), rec, routeRequest(), &out); err != nil {
		t.Fatal(err)
	}
	reqs := srv.requests()
	if len(reqs) != 4 || reqs[3]["response_format"] != nil || reqs[3]["tools"] != nil || out.Pattern != "plan-then-execute" {
		t.Fatalf("%d requests, last %v", len(reqs), reqs[len(reqs)-1])
	}
	resp, err := rec.Complete(ctx(t), actRequest())
	if err != nil || len(resp.Message.ToolCalls) != 1 {
		t.Fatalf("act: %v %+v", err, resp)
	}
	if reqs := srv.requests(); len(reqs) != 5 || reqs[4]["tools"] != nil {
		t.Errorf("the tools request did not start at prompt: %d requests", len(reqs))
	}
	for _, c := range rec.Calls() {
		if c.StructuredMode != "prompt" {
			t.Errorf("recorded %+v", c)
		}
	}
}

// TestNativeServerUnchanged: OpenAI itself is asked with json_schema and
// native tools, in one request each.
func TestNativeServerUnchanged(t *testing.T) {
	srv := startServer(t, fullServer())
	m := modelOf(t, srv.URL, "gpt-4.1-mini")
	resp, err := m.Complete(ctx(t), actRequest())
	if err != nil {
		t.Fatal(err)
	}
	reqs := srv.requests()
	if len(reqs) != 1 || formatOf(reqs[0]) != "json_schema" || reqs[0]["tools"] == nil || resp.StructuredMode != "json_schema" ||
		len(resp.Message.ToolCalls) != 1 || resp.Message.ToolCalls[0].ID != "call_native" {
		t.Fatalf("%d requests, response %+v", len(reqs), resp)
	}
}

// TestUnavailableIsNotARefusal: a 503 is the server being down, not a
// shape it refuses: the call is retried in the same mode and no mode is
// given up.
func TestUnavailableIsNotARefusal(t *testing.T) {
	s := fullServer()
	s.down, s.downFor = http.StatusServiceUnavailable, 2
	srv := startServer(t, s)
	resp, err := modelOf(t, srv.URL, "gpt-4.1-mini").Complete(ctx(t), routeRequest())
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range srv.requests() {
		if formatOf(r) != "json_schema" {
			t.Errorf("request %d sent as %s", i, formatOf(r))
		}
	}
	if n := len(srv.requests()); n != 3 || resp.StructuredMode != "json_schema" {
		t.Errorf("%d requests, mode %q", n, resp.StructuredMode)
	}
}

// TestEveryModeRefused: a request every mode of which is refused (a
// prompt too long for the context, say) fails as unavailable after one
// request per mode and a last one with the call's retries (400 is not
// retried), and nothing is remembered.
func TestEveryModeRefused(t *testing.T) {
	srv := startServer(t, server{refusal: 400, refuseText: "maximum context length exceeded", autoTools: "refuse"})
	srv.downFor, srv.down = 1000, 400
	rec := llm.Record(modelOf(t, srv.URL, "tiny"))
	_, err := rec.Complete(ctx(t), routeRequest())
	if !errors.Is(err, llm.ErrUnavailable) || !strings.Contains(err.Error(), "refused in every structured mode") {
		t.Fatalf("err = %v", err)
	}
	if n := len(srv.requests()); n != len(openai.Ladder)+1 {
		t.Errorf("%d requests", n)
	}
	if _, ok := openai.ModeOf(srv.URL, "tiny", false); ok {
		t.Error("a mode was remembered")
	}
	if c := rec.Calls(); len(c) != 1 || c[0].StructuredMode != "json_schema" || c[0].Error == "" {
		t.Errorf("recorded %+v", c)
	}
}

// TestStreamInEnvelopeMode: a streamed request whose answer is not the
// wire text (an envelope) is not streamed on the wire; the whole answer
// reaches the stream once.
func TestStreamInEnvelopeMode(t *testing.T) {
	srv := startServer(t, forcingServer())
	var deltas []string
	req := routeRequest()
	req.Stream = func(d string) { deltas = append(deltas, d) }
	resp, err := modelOf(t, srv.URL, "streamer").Complete(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(deltas) != 1 || deltas[0] != routeAnswer || resp.Message.Content != routeAnswer {
		t.Errorf("deltas %q, content %q", deltas, resp.Message.Content)
	}
	reqs := srv.requests()
	if last := reqs[len(reqs)-1]; last["tool_choice"] == nil || last["stream"] == true {
		t.Errorf("the forced request: tool_choice %v, stream %v", last["tool_choice"], last["stream"])
	}
}

// TestEnvelopeReading: what a small model writes in an envelope mode is
// read leniently but never invents a call: a fenced envelope and a bare
// {"name", "arguments"} of a known tool are tool calls; a call of a tool
// the request does not offer, or plain text, stays the answer's content
// (and fails its schema downstream).
func TestEnvelopeReading(t *testing.T) {
	cases := []struct {
		say      string
		wantCall string
	}{
		{"```json\n" + actCall + "\n```", "outlet_list"},
		{`{"name":"menu_catalog","arguments":{}}`, "menu_catalog"},
		{`{"tool_call":{"name":"delete_everything","arguments":{}}}`, ""},
		{`{"name":"outlet_list"}`, ""},
		{"The outlets are listed.", ""},
	}
	for _, tc := range cases {
		s := llamaCppPython()
		s.say = func() string { return tc.say }
		srv := startServer(t, s)
		resp, err := modelOf(t, srv.URL, "smollm2").Complete(ctx(t), actRequest())
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case tc.wantCall != "" && (len(resp.Message.ToolCalls) != 1 || resp.Message.ToolCalls[0].Name != tc.wantCall):
			t.Errorf("%q: read as %+v, want a call of %s", tc.say, resp.Message, tc.wantCall)
		case tc.wantCall == "" && (len(resp.Message.ToolCalls) != 0 || resp.Message.Content != tc.say):
			t.Errorf("%q: read as %+v, want the text as content", tc.say, resp.Message)
		}
	}
}

// TestGrammarSafeSchema: the schema a server compiles into a grammar
// (json_object's schema field, a forced function's parameters) leaves out
// bounds too large to unroll (the extraction script's maxLength of 20000
// crashes llama-cpp-python's server); the prompt still states them.
func TestGrammarSafeSchema(t *testing.T) {
	s := llamaCppPython()
	s.say = func() string { return `{"language":"jq","script":".outlets | length"}` }
	srv := startServer(t, s)
	req := llm.NewRequest(llm.TaskExtract, llm.ExtractInput{Task: "count the outlets"})
	req.Schema = llm.ExtractSchema
	if _, err := modelOf(t, srv.URL, "smollm2").Complete(ctx(t), req); err != nil {
		t.Fatal(err)
	}
	last := srv.requests()[len(srv.requests())-1]
	sent, _ := json.Marshal(last["response_format"].(map[string]any)["schema"])
	if formatOf(last) != "json_object" || strings.Contains(string(sent), "20000") || !strings.Contains(string(sent), `"minLength":1`) ||
		!strings.Contains(string(sent), `"jq"`) {
		t.Errorf("schema sent for the grammar: %s", sent)
	}
	if prompt := messages(t, last)[1]["content"].(string); !strings.Contains(prompt, `"maxLength":20000`) {
		t.Errorf("the prompt lost the bound: %.300s", prompt)
	}
}
