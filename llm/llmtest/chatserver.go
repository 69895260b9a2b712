package llmtest

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/llm"
)

// Exchange is one scripted answer of a ChatServer. A request is answered
// by the first unused exchange whose Task matches the request's system
// prompt and whose When, if set, occurs in the request body.
type Exchange struct {
	Task llm.Task `json:"task"`
	When string   `json:"when,omitempty"`
	// Status, when set, answers with that HTTP error (and RetryAfter as
	// the Retry-After header) instead of a completion.
	Status     int    `json:"status,omitempty"`
	RetryAfter string `json:"retry_after,omitempty"`
	// Times is how many requests the exchange answers; 0 means once, -1
	// means every matching request from then on.
	Times     int            `json:"times,omitempty"`
	Content   string         `json:"content,omitempty"`
	ToolCalls []ScriptedCall `json:"tool_calls,omitempty"`
	Usage     ScriptedUsage  `json:"usage"`
}

// ScriptedCall is a tool call of an exchange.
type ScriptedCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ScriptedUsage is the usage an exchange reports.
type ScriptedUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	CachedTokens     int `json:"cached_tokens"`
}

// Received is one request a ChatServer received.
type Received struct {
	Task          llm.Task
	Authorization string
	Body          map[string]any
	Raw           []byte
	At            time.Time
}

// ChatServer is a local OpenAI-compatible server (POST /v1/chat/completions,
// JSON and server-sent-event streaming) that replays a scripted
// conversation, for tests that run agentbus against a model provider over
// its real wire format.
type ChatServer struct {
	URL string // the base URL to configure: http://127.0.0.1:<port>/v1
	srv *httptest.Server

	mu        sync.Mutex
	script    []Exchange
	used      []int
	received  []Received
	unmatched []string
}

// LoadScript reads a JSON array of exchanges, replacing each ${NAME} of
// vars in the file's text first.
func LoadScript(path string, vars map[string]string) ([]Exchange, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for k, v := range vars {
		enc, _ := json.Marshal(v)
		b = bytes.ReplaceAll(b, []byte("${"+k+"}"), enc[1:len(enc)-1])
	}
	var ex []Exchange
	if err := json.Unmarshal(b, &ex); err != nil {
		return nil, fmt.Errorf("llmtest: script %s: %w", path, err)
	}
	return ex, nil
}

// NewChatServer starts a server replaying script. Close it when done.
func NewChatServer(script []Exchange) *ChatServer {
	s := &ChatServer{script: script, used: make([]int, len(script))}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL + "/v1"
	return s
}

// Close stops the server.
func (s *ChatServer) Close() { s.srv.Close() }

// Received returns the requests received so far.
func (s *ChatServer) Received() []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Received(nil), s.received...)
}

// Unmatched returns a description of each request no exchange answered.
func (s *ChatServer) Unmatched() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.unmatched...)
}

// Remaining counts the exchanges not used yet (unlimited ones excluded).
func (s *ChatServer) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for i, ex := range s.script {
		if ex.Times >= 0 && s.used[i] < max(ex.Times, 1) {
			n++
		}
	}
	return n
}

// taskOf finds the task whose system prompt the request carries.
func taskOf(body map[string]any) llm.Task {
	msgs, _ := body["messages"].([]any)
	if len(msgs) == 0 {
		return ""
	}
	first, _ := msgs[0].(map[string]any)
	if first["role"] != "system" {
		return ""
	}
	text := fmt.Sprint(first["content"])
	if parts, ok := first["content"].([]any); ok && len(parts) > 0 {
		if p, ok := parts[0].(map[string]any); ok {
			text = fmt.Sprint(p["text"])
		}
	}
	for _, t := range llm.Tasks {
		if strings.TrimSpace(text) == llm.SystemPrompt(t).Text {
			return t
		}
	}
	return ""
}

func (s *ChatServer) serve(w http.ResponseWriter, r *http.Request) {
	raw := new(bytes.Buffer)
	_, _ = raw.ReadFrom(r.Body)
	var body map[string]any
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") || json.Unmarshal(raw.Bytes(), &body) != nil {
		http.Error(w, `{"error":{"message":"not a chat completion request","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	task := taskOf(body)
	s.mu.Lock()
	s.received = append(s.received, Received{Task: task, Authorization: r.Header.Get("Authorization"), Body: body, Raw: raw.Bytes(), At: time.Now()})
	ex, ok := s.match(task, raw.String())
	if !ok {
		s.unmatched = append(s.unmatched, fmt.Sprintf("%s request: %.300s", task, raw.String()))
	}
	n := len(s.received)
	s.mu.Unlock()
	if !ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"message":"no scripted answer for this %s request","type":"invalid_request_error"}}`, task)
		return
	}
	if ex.Status != 0 {
		if ex.RetryAfter != "" {
			w.Header().Set("Retry-After", ex.RetryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(ex.Status)
		fmt.Fprintf(w, `{"error":{"message":"scripted status %d","type":"server_error"}}`, ex.Status)
		return
	}
	model, _ := body["model"].(string)
	id := fmt.Sprintf("chatcmpl-%d", n)
	if stream, _ := body["stream"].(bool); stream {
		writeStream(w, id, model, ex)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": id, "object": "chat.completion", "created": time.Now().Unix(), "model": model,
		"choices": []any{map[string]any{"index": 0, "message": message(ex), "finish_reason": finishReason(ex)}},
		"usage":   usage(ex),
	})
}

// match returns the first usable exchange for the request; s.mu is held.
func (s *ChatServer) match(task llm.Task, body string) (Exchange, bool) {
	for i, ex := range s.script {
		if ex.Task != task || (ex.When != "" && !strings.Contains(body, ex.When)) {
			continue
		}
		if ex.Times >= 0 && s.used[i] >= max(ex.Times, 1) {
			continue
		}
		s.used[i]++
		return ex, true
	}
	return Exchange{}, false
}

func message(ex Exchange) map[string]any {
	m := map[string]any{"role": "assistant", "content": ex.Content}
	if len(ex.ToolCalls) > 0 {
		var calls []any
		for i, c := range ex.ToolCalls {
			calls = append(calls, map[string]any{"id": fmt.Sprintf("call_%d", i+1), "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": string(c.Arguments)}})
		}
		m["tool_calls"] = calls
		if ex.Content == "" {
			m["content"] = nil
		}
	}
	return m
}

func finishReason(ex Exchange) string {
	if len(ex.ToolCalls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

func usage(ex Exchange) map[string]any {
	u := ex.Usage
	return map[string]any{"prompt_tokens": u.PromptTokens, "completion_tokens": u.CompletionTokens,
		"total_tokens": u.PromptTokens + u.CompletionTokens, "prompt_tokens_details": map[string]any{"cached_tokens": u.CachedTokens}}
}

// writeStream answers as the streaming API does: content in several
// deltas, tool calls, a finish chunk, a usage chunk, then [DONE].
func writeStream(w http.ResponseWriter, id, model string, ex Exchange) {
	w.Header().Set("Content-Type", "text/event-stream")
	f, _ := w.(http.Flusher)
	send := func(choices []any, u map[string]any) {
		chunk := map[string]any{"id": id, "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": model, "choices": choices}
		if u != nil {
			chunk["usage"] = u
		}
		b, _ := json.Marshal(chunk)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if f != nil {
			f.Flush()
		}
	}
	delta := func(d map[string]any) []any {
		return []any{map[string]any{"index": 0, "delta": d, "finish_reason": nil}}
	}
	send(delta(map[string]any{"role": "assistant", "content": ""}), nil)
	for _, piece := range split(ex.Content, 3) {
		send(delta(map[string]any{"content": piece}), nil)
	}
	for i, c := range ex.ToolCalls {
		send(delta(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": fmt.Sprintf("call_%d", i+1), "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": string(c.Arguments)}}}}), nil)
	}
	send([]any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finishReason(ex)}}, nil)
	send([]any{}, usage(ex))
	fmt.Fprint(w, "data: [DONE]\n\n")
	if f != nil {
		f.Flush()
	}
}

// split cuts s into about n pieces at rune boundaries.
func split(s string, n int) []string {
	r := []rune(s)
	if len(r) == 0 {
		return nil
	}
	size := max(1, (len(r)+n-1)/n)
	var out []string
	for i := 0; i < len(r); i += size {
		out = append(out, string(r[i:min(i+size, len(r))]))
	}
	return out
}
