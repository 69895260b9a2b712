package a2a

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"strings"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/runclient"
)

// Adapter serves Agent2Agent (A2A 0.3, JSON-RPC binding): mount it with
// the ingress's Adapters. Each active agent of a tenant is an A2A agent
// at /a2a/agents/{agent_id}, and the default router (no agent: the
// router's choice) at /a2a; each has its card at the base URL's
// /.well-known/agent-card.json (and the older /.well-known/agent.json),
// the default's at the host's root too. A run is a task (the task id is
// the run id, the context id its session); see tasks.go for the methods
// and the reply that decides a gate. Authentication, tenant scoping,
// request limits and the run rules are the ingress's.
type Adapter struct{}

// Mount adds the A2A routes.
func (Adapter) Mount(mux *http.ServeMux, runs ingress.Runs) {
	h := handler{runs: runs}
	// Each card at its current path and the older agent.json, written out
	// so the contract test (handlers/ingress TestOpenAPIRoutes) reads them.
	mux.HandleFunc("GET /.well-known/agent-card.json", h.card)
	mux.HandleFunc("GET /.well-known/agent.json", h.card)
	mux.HandleFunc("GET /a2a/.well-known/agent-card.json", h.card)
	mux.HandleFunc("GET /a2a/.well-known/agent.json", h.card)
	mux.HandleFunc("GET /a2a/agents/{agent_id}/.well-known/agent-card.json", h.card)
	mux.HandleFunc("GET /a2a/agents/{agent_id}/.well-known/agent.json", h.card)
	mux.HandleFunc("POST /a2a", h.rpc)
	mux.HandleFunc("POST /a2a/agents/{agent_id}", h.rpc)
}

type handler struct{ runs ingress.Runs }

// card serves an agent's card: the default router's, or the tenant's
// active agent's (404 not_found for another, as for a missing one).
func (h handler) card(w http.ResponseWriter, r *http.Request) {
	tenant, ok := h.runs.Tenant(w, r)
	if !ok {
		return
	}
	id := r.PathValue("agent_id")
	base := baseURL(r) + "/a2a"
	if id == "" {
		ingress.WriteJSON(w, http.StatusOK, defaultCard(base))
		return
	}
	a, ok := h.agent(w, r, tenant, id)
	if !ok {
		return
	}
	ingress.WriteJSON(w, http.StatusOK, agentCard(base+"/agents/"+id, a))
}

// agent is the tenant's active agent id; false once it answered 404.
func (h handler) agent(w http.ResponseWriter, r *http.Request, tenant, id string) (agents.Agent, bool) {
	list, ok := h.runs.Agents(w, r, tenant)
	if !ok {
		return agents.Agent{}, false
	}
	for _, a := range list {
		if a.AgentID == id && a.Status == agents.StatusActive {
			return a, true
		}
	}
	ingress.WriteError(w, http.StatusNotFound, "not_found", "agent not found")
	return agents.Agent{}, false
}

// baseURL is the scheme and host the caller reached: a proxy's
// X-Forwarded-Proto and X-Forwarded-Host when it sets them.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p := r.Header.Get("X-Forwarded-Proto"); p == "https" || p == "http" {
		scheme = p
	}
	return scheme + "://" + cmp.Or(r.Header.Get("X-Forwarded-Host"), r.Host)
}

// bearer is the ingress's authentication as a card declares it.
var bearer = map[string]SecurityScheme{"bearer": {Type: "http", Scheme: "bearer",
	Description: "the ingress's credential: a tenant API key (abk_...), a JWT, or the service token with X-Tenant-Id"}}

func card(url, name, description string, skills []Skill) AgentCard {
	return AgentCard{ProtocolVersion: ProtocolVersion, Name: name, Description: description, URL: url,
		PreferredTransport: "JSONRPC", Version: "1", Provider: &Provider{Organization: "agentbus", URL: url},
		Capabilities:    Capabilities{Streaming: true},
		SecuritySchemes: bearer, Security: []map[string][]string{{"bearer": {}}},
		DefaultInputModes: []string{"text/plain", "application/json"}, DefaultOutputModes: []string{"text/plain"},
		Skills: skills}
}

// defaultCard is the card of the default router: a run that acts as no
// agent, routed by its task type.
func defaultCard(url string) AgentCard {
	return card(url, "agentbus", "agentbus's router: plans the task, runs its steps with the tenant's skills and answers",
		[]Skill{{ID: "agentbus", Name: "any task", Description: "the task is routed by its type and pattern, planned and run with the tenant's skills",
			Tags: []string{"router", "planning", "tools"}}})
}

// agentCard is the card of a tenant's agent: one skill, the agent, tagged
// with its tools.
func agentCard(url string, a agents.Agent) AgentCard {
	desc := cmp.Or(a.Description, a.Name)
	return card(url, a.Name, desc, []Skill{{ID: a.AgentID, Name: a.Name, Description: desc,
		Tags: append([]string{a.Type}, a.Tools...)}})
}

// rpc serves a JSON-RPC request: one call (a batch is refused), answered
// with its result or its error, or, for message/stream and
// tasks/resubscribe, as server-sent events.
func (h handler) rpc(w http.ResponseWriter, r *http.Request) {
	var req Request
	if code, err := h.runs.Decode(w, r, &req); err != nil {
		rpcCode := CodeParseError
		if code == "body_too_large" || code == "body_timeout" {
			rpcCode = CodeInvalidRequest
		}
		writeRPC(w, nil, nil, &Error{Code: rpcCode, Message: err.Error(), Data: &ErrorData{Code: code}})
		return
	}
	if req.JSONRPC != "2.0" || req.Method == "" {
		writeRPC(w, req.ID, nil, &Error{Code: CodeInvalidRequest, Message: `a JSON-RPC 2.0 request: {"jsonrpc": "2.0", "id", "method", "params"}`})
		return
	}
	c := call{h: h, w: w, r: r, id: req.ID, agentID: r.PathValue("agent_id")}
	if c.agentID != "" {
		tenant, ok := h.runs.Tenant(w, r)
		if !ok {
			return
		}
		if _, ok := h.agent(w, r, tenant, c.agentID); !ok {
			return
		}
	}
	method, ok := methods[req.Method]
	if !ok {
		writeRPC(w, req.ID, nil, &Error{Code: CodeMethodNotFound, Message: "no method " + req.Method})
		return
	}
	res, err := method(c, req.Params)
	if res == nil && err == nil {
		return // streamed
	}
	writeRPC(w, req.ID, res, rpcError(err))
}

// methods are the JSON-RPC methods of A2A 0.3.
var methods = map[string]func(call, json.RawMessage) (any, error){
	"message/send":      call.send,
	"message/stream":    call.stream,
	"tasks/get":         call.get,
	"tasks/cancel":      call.cancel,
	"tasks/resubscribe": call.resubscribe,
	"tasks/pushNotificationConfig/set": func(call, json.RawMessage) (any, error) {
		return nil, &Error{Code: CodePushNotSupported, Message: "push notifications are not supported: stream, or poll tasks/get"}
	},
}

// writeRPC answers a JSON-RPC call: always HTTP 200, the error in the body.
func writeRPC(w http.ResponseWriter, id json.RawMessage, result any, err *Error) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	resp := Response{JSONRPC: "2.0", ID: id, Result: result, Error: err}
	if err != nil {
		resp.Result = nil
	}
	ingress.WriteJSON(w, http.StatusOK, resp)
}

func rpcError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}

// call is one JSON-RPC call: the request it came in and the agent whose
// endpoint it reached ("" for the default router).
type call struct {
	h       handler
	w       http.ResponseWriter
	r       *http.Request
	id      json.RawMessage
	agentID string
}

// params decodes a call's params into v.
func params(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		return &Error{Code: CodeInvalidParams, Message: "params are required"}
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return &Error{Code: CodeInvalidParams, Message: "params: " + err.Error()}
	}
	return nil
}

// recorder holds what a native route answered, for a call to turn into
// its result or its error.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

// refused is the error of a native refusal the recorder holds, or nil for
// a success. A missing run is TaskNotFound; a run that ended, for a
// cancel, TaskNotCancelable; a refused request InvalidParams; what the
// server could not do an internal error. Data keeps the native status
// and code.
func (r *recorder) refused(notCancelable bool) error {
	if r.status != 0 && r.status < 300 {
		return nil
	}
	var e runclient.APIError
	_ = json.Unmarshal(r.body.Bytes(), &e)
	data := &ErrorData{Status: r.status, Code: e.Error.Code}
	msg := cmp.Or(e.Error.Message, fmt.Sprintf("refused (HTTP %d)", r.status))
	switch {
	case r.status == http.StatusNotFound:
		return &Error{Code: CodeTaskNotFound, Message: "task not found", Data: data}
	case notCancelable && e.Error.Code == "run_finished":
		return &Error{Code: CodeTaskNotCancelable, Message: msg, Data: data}
	case r.status >= 500 || r.status == http.StatusTooManyRequests || r.status == 0:
		return &Error{Code: CodeInternal, Message: msg, Data: data}
	default:
		return &Error{Code: CodeInvalidParams, Message: msg, Data: data}
	}
}

// text joins a message's text parts (and data parts, as their JSON) with
// blank lines; a file part is refused.
func text(m Message) (string, error) {
	var out []string
	for i, p := range m.Parts {
		switch p.Kind {
		case "text":
			out = append(out, p.Text)
		case "data":
			out = append(out, string(p.Data))
		default:
			return "", &Error{Code: CodeContentTypeNotAllowed, Message: fmt.Sprintf("message.parts[%d]: a %q part: only text and data parts are read", i, p.Kind)}
		}
	}
	return strings.Join(out, "\n\n"), nil
}
