package chat

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	json "github.com/go-json-experiment/json/v1"
	"github.com/google/uuid"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
)

// Adapter serves the OpenAI-compatible endpoint: mount it with the
// ingress's Adapters. Chat front ends and the OpenAI SDKs
// speak chat completions: POST /v1/chat/completions runs the conversation's
// last user message as a run, the model name choosing the tenant's agent
// (DefaultChatModel: no agent, the router's choice), and answers in
// OpenAI's shapes, streamed as chat.completion.chunk events when asked.
// The run's progress streams as the chunks' reasoning_content (what front
// ends show as the model's thinking); a gate ends the answer with a
// message saying how to decide it. Authentication, tenant scoping and
// request limits are the ingress's; errors keep the native body
// ({"error": {"code", "message"}}), which the SDKs read as theirs.
type Adapter struct{}

// Mount adds POST /v1/chat/completions and GET /v1/models.
func (Adapter) Mount(mux *http.ServeMux, runs ingress.Runs) {
	h := handler{runs: runs}
	mux.HandleFunc("POST /v1/chat/completions", h.completions)
	mux.HandleFunc("GET /v1/models", h.models)
}

type handler struct{ runs ingress.Runs }

// DefaultChatModel is the model name of a run that acts as no agent.
const DefaultChatModel = "agentbus"

// ChatRequest is the body of POST /v1/chat/completions: the fields
// agentbus reads. A sampling setting the body carries (temperature,
// max_tokens, ...) is accepted and left to the run's agent and model.
type ChatRequest struct {
	Model         string            `json:"model"`
	Messages      []ChatMessage     `json:"messages"`
	Stream        bool              `json:"stream,omitempty"`
	StreamOptions *ChatStreamOpts   `json:"stream_options,omitempty"`
	N             int               `json:"n,omitempty"`
	User          string            `json:"user,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
}

// ChatStreamOpts asks a stream for a last chunk with the usage.
type ChatStreamOpts struct {
	IncludeUsage bool `json:"include_usage"`
}

// ChatMessage is one message of a conversation. Content is a string or
// an array of content parts, of which only text parts are read.
type ChatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// ChatCompletion answers a chat that does not stream. AgentBus names the
// run behind it, which an OpenAI client ignores.
type ChatCompletion struct {
	ID       string       `json:"id"`
	Object   string       `json:"object"`
	Created  int64        `json:"created"`
	Model    string       `json:"model"`
	Choices  []ChatChoice `json:"choices"`
	Usage    ChatUsage    `json:"usage"`
	AgentBus ChatRun      `json:"agentbus"`
}

// ChatChoice is the one answer of a completion.
type ChatChoice struct {
	Index        int        `json:"index"`
	Message      ChatAnswer `json:"message"`
	FinishReason string     `json:"finish_reason"`
	Logprobs     *struct{}  `json:"logprobs"`
}

// ChatAnswer is the assistant's message, or a stream chunk's delta.
type ChatAnswer struct {
	Role             string `json:"role,omitempty"`
	Content          string `json:"content,omitempty"`
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

// ChatUsage is the run's model usage in OpenAI's terms.
type ChatUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// ChatRun identifies the run behind an answer.
type ChatRun struct {
	RunID        string `json:"run_id"`
	PlanID       string `json:"plan_id"`
	SessionID    string `json:"session_id"`
	Status       string `json:"status"`
	TerminalCode string `json:"terminal_code,omitempty"`
}

func chatUsage(u llm.Usage) ChatUsage {
	return ChatUsage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.InputTokens + u.OutputTokens}
}

// completions serves POST /v1/chat/completions.
func (h handler) completions(w http.ResponseWriter, r *http.Request) {
	var body ChatRequest
	if code, err := h.runs.Decode(w, r, &body); err != nil {
		ingress.WriteError(w, ingress.StatusOf(code), code, err.Error())
		return
	}
	native, code, err := chatRun(r, body)
	if err != nil {
		ingress.WriteError(w, ingress.StatusOf(code), code, err.Error())
		return
	}
	run, ok := h.runs.Start(w, r, "POST /v1/chat/completions", native)
	if !ok {
		return
	}
	defer run.Close()
	req := run.Request
	model := cmp.Or(body.Model, DefaultChatModel)
	id, created := "chatcmpl-"+req.RunID, h.runs.Now().Unix()
	if req.Stream {
		s, err := openChatStream(w, req, id, model, created, body.StreamOptions != nil && body.StreamOptions.IncludeUsage)
		if err != nil {
			ingress.WriteError(w, http.StatusInternalServerError, "internal", err.Error())
			return
		}
		defer s.close()
		run.Stream(s)
		return
	}
	res, err := run.Wait()
	if err != nil {
		ingress.WriteRunTimeout(w, req.RunID)
		return
	}
	content := res.Response
	if runclient.Parked(res) {
		var p orch.GatePacket
		_ = json.Unmarshal(res.Detail, &p)
		content = gateAnswer(req.RunID, p)
	}
	w.Header().Set("X-Run-Id", req.RunID)
	ingress.WriteJSON(w, http.StatusOK, ChatCompletion{ID: id, Object: "chat.completion", Created: created, Model: model,
		Choices: []ChatChoice{{Message: ChatAnswer{Role: string(llm.RoleAssistant), Content: content}, FinishReason: "stop"}},
		Usage:   chatUsage(res.Usage),
		AgentBus: ChatRun{RunID: req.RunID, PlanID: orch.PlanID(req.RunID), SessionID: req.SessionID, Status: res.Status,
			TerminalCode: res.TerminalCode}})
}

// chatRun is the native run request a chat asks for: the last message,
// a user's, is the task; the model names the agent; the session is the
// X-Session-Id header's (runRequest applies it), else the metadata's
// session_id or conversation_id, else a new one; the user is the body's
// user, else the credential's or X-User-Id (runRequest), else one of the
// conversation's own ("chat-" and a hash of the session).
func chatRun(r *http.Request, body ChatRequest) (runclient.Request, string, error) {
	switch {
	case body.N > 1:
		return runclient.Request{}, "unsupported", errors.New("n: a chat completion answers with one choice")
	case len(body.Messages) == 0:
		return runclient.Request{}, "invalid_request", errors.New("messages: at least one message is required")
	}
	last := body.Messages[len(body.Messages)-1]
	if last.Role != string(llm.RoleUser) {
		return runclient.Request{}, "invalid_request", fmt.Errorf("messages: the last message is the task and must be the user's, not %q", last.Role)
	}
	task, err := messageText(last.Content)
	if err != nil {
		return runclient.Request{}, "invalid_request", fmt.Errorf("messages[%d].content: %w", len(body.Messages)-1, err)
	}
	req := runclient.Request{Message: task, Stream: body.Stream, UserID: body.User,
		SessionID: cmp.Or(body.Metadata["session_id"], body.Metadata["conversation_id"])}
	if body.Model != DefaultChatModel {
		req.AgentID = body.Model
	}
	if req.SessionID == "" {
		req.SessionID = cmp.Or(r.Header.Get("X-Session-Id"), "chat-"+uuid.NewString())
	}
	if req.UserID == "" && r.Header.Get("X-User-Id") == "" && !ingress.BindsUser(r) {
		// A caller that names no user is a user of its conversation only:
		// what it says is never recalled by another anonymous caller.
		sum := sha256.Sum256([]byte(req.SessionID))
		req.UserID = "chat-" + hex.EncodeToString(sum[:8])
	}
	return req, "", nil
}

// messageText is a message's text: its content string, or its text parts
// joined by blank lines.
func messageText(content json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(content, &parts); err != nil {
		return "", errors.New("content is a string or an array of content parts")
	}
	var texts []string
	for _, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("a %q content part: only text is read", p.Type)
		}
		texts = append(texts, p.Text)
	}
	return strings.Join(texts, "\n\n"), nil
}

// gateAnswer is the assistant's message for a run that waits at a gate:
// what it waits for, and how to decide it.
func gateAnswer(runID string, p orch.GatePacket) string {
	return runclient.GateMessage(p) + fmt.Sprintf("\n\nDecide it with POST /agent/runs/%s/approvals/%s "+
		`{"decision": "approve"} (or "deny"), or agentbus approve %s %s; follow the run with GET /agent/runs/%s/stream.`,
		runID, p.Gate, runID, p.Gate, runID)
}

// models serves GET /v1/models: DefaultChatModel and the tenant's
// active agents, by agent id.
func (h handler) models(w http.ResponseWriter, r *http.Request) {
	tenant, ok := h.runs.Tenant(w, r)
	if !ok {
		return
	}
	list, ok := h.runs.Agents(w, r, tenant)
	if !ok {
		return
	}
	out := []ChatModel{{ID: DefaultChatModel, Object: "model", OwnedBy: "agentbus"}}
	for _, a := range list {
		if a.Status == agents.StatusActive {
			out = append(out, ChatModel{ID: a.AgentID, Object: "model", Created: a.CreatedAt.Unix(), OwnedBy: tenant})
		}
	}
	ingress.WriteJSON(w, http.StatusOK, ChatModelList{Object: "list", Data: out})
}

// ChatModel is one model of GET /v1/models: an agent, or the default.
type ChatModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// ChatModelList answers GET /v1/models.
type ChatModelList struct {
	Object string      `json:"object"`
	Data   []ChatModel `json:"data"`
}

// chatStream serves a run's chunks as OpenAI's chat.completion.chunk
// server-sent events: the answer as content deltas, progress as
// reasoning_content deltas, then a chunk with finish_reason stop, the
// usage chunk when asked, and [DONE].
type chatStream struct {
	mu           sync.Mutex
	w            http.ResponseWriter
	f            http.Flusher
	runID        string
	id, model    string
	created      int64
	includeUsage bool
	roleSent     bool
	answered     bool
	ended        bool
	closed       bool
}

func openChatStream(w http.ResponseWriter, req orch.RunRequest, id, model string, created int64, includeUsage bool) (*chatStream, error) {
	f, ok := w.(http.Flusher)
	if !ok {
		return nil, errors.New("response writer cannot flush")
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Run-Id", req.RunID)
	w.WriteHeader(http.StatusOK)
	f.Flush()
	return &chatStream{w: w, f: f, runID: req.RunID, id: id, model: model, created: created, includeUsage: includeUsage}, nil
}

// ChatChunk is one chat.completion.chunk of a stream.
type ChatChunk struct {
	ID      string            `json:"id"`
	Object  string            `json:"object"`
	Created int64             `json:"created"`
	Model   string            `json:"model"`
	Choices []ChatChunkChoice `json:"choices"`
	Usage   *ChatUsage        `json:"usage,omitempty"`
}

// ChatChunkChoice is a chunk's delta of the one answer, and, in the
// last but the usage chunk, its finish reason.
type ChatChunkChoice struct {
	Index        int        `json:"index"`
	Delta        ChatAnswer `json:"delta"`
	FinishReason *string    `json:"finish_reason"`
}

// Send translates one chunk of the run.
func (s *chatStream) Send(_ uint64, c runclient.Chunk) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.ended {
		return
	}
	switch c.MessageType {
	case "answer":
		s.delta(ChatAnswer{Content: c.Content})
		s.answered = s.answered || c.Content != ""
	case runclient.ChunkAwaitingGate:
		var p orch.GatePacket
		_ = json.Unmarshal([]byte(c.Content), &p)
		if !c.EndOfDialog {
			s.delta(ChatAnswer{ReasoningContent: fmt.Sprintf("waiting at gate %s\n", p.Gate)})
			return
		}
		s.delta(ChatAnswer{Content: sep(s.answered) + gateAnswer(s.runID, p)})
		s.finish(nil)
	case "result", "error":
		var res runclient.Response
		if json.Unmarshal([]byte(c.Content), &res) != nil {
			res.Response = c.Content // a failure the ingress wrote as text
		}
		if !s.answered && res.Response != "" {
			s.delta(ChatAnswer{Content: res.Response})
		}
		u := chatUsage(res.Usage)
		s.finish(&u)
	default:
		if line, ok := runclient.Describe(c); ok {
			s.delta(ChatAnswer{ReasoningContent: line + "\n"})
		}
	}
}

// sep separates a gate's message from an answer already streamed.
func sep(answered bool) string {
	if answered {
		return "\n\n"
	}
	return ""
}

// delta writes a chunk carrying d (with the role on the first one).
func (s *chatStream) delta(d ChatAnswer) {
	if !s.roleSent {
		d.Role, s.roleSent = string(llm.RoleAssistant), true
	}
	s.write(ChatChunk{ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: s.model,
		Choices: []ChatChunkChoice{{Delta: d}}})
}

// finish ends the stream: finish_reason stop, the usage if asked, [DONE].
func (s *chatStream) finish(u *ChatUsage) {
	stop := "stop"
	s.write(ChatChunk{ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: s.model,
		Choices: []ChatChunkChoice{{Delta: ChatAnswer{}, FinishReason: &stop}}})
	if s.includeUsage {
		if u == nil {
			u = &ChatUsage{}
		}
		s.write(ChatChunk{ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: s.model,
			Choices: []ChatChunkChoice{}, Usage: u})
	}
	fmt.Fprint(s.w, "data: [DONE]\n\n")
	s.f.Flush()
	s.ended = true
}

func (s *chatStream) write(c ChatChunk) {
	b, _ := json.Marshal(c)
	fmt.Fprintf(s.w, "data: %s\n\n", b)
	s.f.Flush()
}

// Ended reports that the stream sent [DONE].
func (s *chatStream) Ended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}

// close stops writing; no write happens after it returns.
func (s *chatStream) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}
