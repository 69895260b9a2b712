package openai

import (
	"errors"
	"net/http"
	"sync"

	sdk "github.com/openai/openai-go/v3"
)

// Mode is how a call asks an OpenAI-compatible server for a structured
// answer (a request with a schema) or for tool calls (a request with
// tools). Servers differ: OpenAI, vLLM and Ollama take a JSON schema as the
// response format; llama-cpp-python takes only json_object; some take
// neither. The ladder tries the modes in order.
type Mode string

// The modes, best first.
const (
	// ModeJSONSchema sends response_format json_schema, and the tools as
	// native tools (tool_choice auto).
	ModeJSONSchema Mode = "json_schema"
	// ModeJSONObject sends response_format json_object with the schema in
	// the prompt (and in the format's "schema" field, which servers such as
	// llama-cpp-python turn into a grammar). Tools are described in the
	// prompt; the model answers a tool call as JSON (see envelope).
	ModeJSONObject Mode = "json_object"
	// ModeToolForcing sends the schema (or, with tools, the envelope) as
	// the parameters of one function the model must call.
	ModeToolForcing Mode = "tool_forcing"
	// ModePrompt only states the schema (and the tools) in the prompt;
	// the answer is validated after the fact (llm.Structured repairs it).
	ModePrompt Mode = "prompt"
)

// Ladder is the order the modes are tried in.
var Ladder = []Mode{ModeJSONSchema, ModeJSONObject, ModeToolForcing, ModePrompt}

// kind is what a request asks for that a mode shapes.
type kind int

const (
	kindPlain  kind = iota // free text: no mode
	kindSchema             // a JSON answer against req.Schema
	kindTools              // tool calls (and, with a schema, a JSON answer)
)

// modeKey names one server's model and one kind of request: what works is
// remembered per base URL and model id, for the process.
type modeKey struct {
	baseURL, model string
	kind           kind
}

// rung is the state of one key's ladder: the index of the mode to use
// and whether a call in that mode has succeeded.
type rung struct {
	at        int
	confirmed bool
}

// modeMemory is every key's ladder state, shared by every Model of the
// process (each role opens its own Model of the same server).
type modeMemory struct {
	mu    sync.Mutex
	rungs map[modeKey]rung
}

var remembered = &modeMemory{rungs: map[modeKey]rung{}}

// get returns the key's state; a new key starts at the top, unconfirmed.
func (mm *modeMemory) get(k modeKey) rung {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	return mm.rungs[k]
}

// confirm records that mode at index i worked for k.
func (mm *modeMemory) confirm(k modeKey, i int) {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	mm.rungs[k] = rung{at: i, confirmed: true}
}

// ModeOf is the mode remembered for the server at baseURL ("" for
// OpenAI's) and model: for requests with tools when tools is set, else
// for requests with a schema. ok is false until a call has succeeded.
func ModeOf(baseURL, model string, tools bool) (Mode, bool) {
	k := modeKey{baseURL: baseURL, model: model, kind: kindSchema}
	if tools {
		k.kind = kindTools
	}
	r := remembered.get(k)
	return Ladder[r.at], r.confirmed
}

// start is where a call of kind k begins on the ladder: a tools request
// never starts above the mode schema requests settled on (a server that
// refuses a JSON schema as response format refuses it with tools too).
func (mm *modeMemory) start(k modeKey) rung {
	r := mm.get(k)
	if k.kind == kindTools {
		if s := mm.get(modeKey{baseURL: k.baseURL, model: k.model, kind: kindSchema}); s.confirmed && s.at > r.at {
			return rung{at: s.at}
		}
	}
	return r
}

// refused reports whether err is the server turning down the request's
// shape (an unknown response format, tools it does not take) rather than
// being unavailable: 400, 415, 422, or a 500 or 501 (llama-cpp-python
// answers 500 to a json_schema response format). The ladder then tries
// the next mode; 401, 403, 404, 408, 409, 429 and the 502-504 family are
// not about the request's shape.
func refused(err error) bool {
	var apiErr *sdk.Error
	return errors.As(err, &apiErr) && refusedStatus(apiErr.StatusCode)
}

func refusedStatus(status int) bool {
	switch status {
	case http.StatusBadRequest, http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity,
		http.StatusInternalServerError, http.StatusNotImplemented:
		return true
	}
	return false
}
