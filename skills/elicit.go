package skills

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	json "github.com/go-json-experiment/json/v1"
	"github.com/mark3labs/mcp-go/mcp"
)

// Elicitation (MCP): a server may ask the user for input in the middle of
// a tool call, with a message and the JSON Schema of the answer it wants.
// Whether the server asks with a request of its own (elicitation/create,
// protocol 2025-11-25) or by answering the call "input required" (multi
// round-trip requests, 2026-07-28), the question reaches the call's
// Elicitor. A call has no user at hand to answer it: the Elicitor answers
// a question it holds a recorded answer for, and otherwise cancels it and
// makes the call fail with an ElicitationError, so that the caller can
// park the call until someone answers and then make it again with the
// answer (WithElicitor). A question outside any call is declined.

// Elicitation is what a server asked the user during a call.
type Elicitation struct {
	Message string `json:"message"`
	// Schema is the JSON Schema of the answer (a flat object).
	Schema json.RawMessage `json:"requested_schema,omitempty"`
	// Question identifies the question (a hash of the message and the
	// schema), so that an answer is given to the question it answers.
	Question string `json:"question"`
}

// Answer is a user's answer to an Elicitation: its content, accepted, for
// the Question it answers.
type Answer struct {
	Question string          `json:"question"`
	Content  json.RawMessage `json:"content"`
}

// ErrElicitation reports a call the server asked the user something
// during, with no answer on hand: see ElicitationError.
var ErrElicitation = errors.New("skills: the tool asks the user for input")

// ElicitationError is the error of a call whose server asked a question
// the call's Elicitor had no answer for. The call was answered "cancel";
// its result, if any, is not returned.
type ElicitationError struct{ Elicitation Elicitation }

func (e *ElicitationError) Error() string {
	return fmt.Sprintf("%v: %s", ErrElicitation, e.Elicitation.Message)
}

func (e *ElicitationError) Unwrap() error { return ErrElicitation }

// Elicitor answers the questions a server asks during one call: the
// answers given so far, in order, each to the question it answers. A
// question beyond them is cancelled and recorded (Asked).
type Elicitor struct {
	answers []Answer
	// Fallback, when set, answers a question none of the answers does:
	// the content to accept with, or false to cancel as usual.
	Fallback func(Elicitation) (json.RawMessage, bool)

	mu    sync.Mutex
	next  int
	asked *Elicitation
}

// NewElicitor returns an Elicitor that gives answers, in order.
func NewElicitor(answers []Answer) *Elicitor { return &Elicitor{answers: answers} }

// Asked returns the question that had no answer, if one was asked.
func (e *Elicitor) Asked() (Elicitation, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.asked == nil {
		return Elicitation{}, false
	}
	return *e.asked, true
}

type elicitorKey struct{}

// WithElicitor returns ctx whose calls have e answer the questions their
// servers ask.
func WithElicitor(ctx context.Context, e *Elicitor) context.Context {
	return context.WithValue(ctx, elicitorKey{}, e)
}

func elicitorFrom(ctx context.Context) *Elicitor {
	e, _ := ctx.Value(elicitorKey{}).(*Elicitor)
	return e
}

// QuestionOf returns the Elicitation of an elicitation request's params.
func QuestionOf(p mcp.ElicitationParams) Elicitation {
	schema, _ := json.Marshal(p.RequestedSchema)
	if p.RequestedSchema == nil {
		schema = nil
	}
	sum := sha256.Sum256(append(append([]byte(p.Message), 0), schema...))
	return Elicitation{Message: p.Message, Schema: schema, Question: hex.EncodeToString(sum[:8])}
}

// answer answers one question: the next recorded answer when it answers
// this question; else the question is recorded and cancelled.
func (e *Elicitor) answer(p mcp.ElicitationParams) *mcp.ElicitationResult {
	if p.Mode == mcp.ElicitationModeURL {
		// An out-of-band URL needs a user at a browser; a run has none.
		return elicitResult(mcp.ElicitationResponseActionDecline, nil)
	}
	q := QuestionOf(p)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.asked == nil && e.next < len(e.answers) && e.answers[e.next].Question == q.Question {
		a := e.answers[e.next]
		e.next++
		var content map[string]any
		if json.Unmarshal(a.Content, &content) == nil {
			return elicitResult(mcp.ElicitationResponseActionAccept, content)
		}
	}
	if e.asked == nil && e.Fallback != nil {
		if answer, ok := e.Fallback(q); ok {
			var content map[string]any
			if json.Unmarshal(answer, &content) == nil {
				return elicitResult(mcp.ElicitationResponseActionAccept, content)
			}
		}
	}
	if e.asked == nil {
		e.asked = &q
	}
	return elicitResult(mcp.ElicitationResponseActionCancel, nil)
}

func elicitResult(action mcp.ElicitationResponseAction, content map[string]any) *mcp.ElicitationResult {
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: action, Content: content}}
}

// elicitHandler answers a connection's elicitation requests with the
// Elicitor of the call that caused them: the request's context carries it
// when the server asks on the call's own stream (streamable HTTP, and
// every input-required answer); otherwise it is the connection's only
// call in flight that has one. A question no call can own is declined.
type elicitHandler struct{ cn *conn }

func (h elicitHandler) Elicit(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	e := elicitorFrom(ctx)
	if e == nil {
		e = h.cn.soleElicitor()
	}
	if e == nil {
		return elicitResult(mcp.ElicitationResponseActionDecline, nil), nil
	}
	return e.answer(req.Params), nil
}

// track counts a call in flight on cn, with its Elicitor e (or nil),
// until the returned func is called.
func (cn *conn) track(e *Elicitor) func() {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	cn.inflight++
	if e != nil {
		if cn.elicitors == nil {
			cn.elicitors = map[*Elicitor]int{}
		}
		cn.elicitors[e]++
	}
	return func() {
		cn.mu.Lock()
		defer cn.mu.Unlock()
		cn.inflight--
		if e != nil {
			if cn.elicitors[e]--; cn.elicitors[e] == 0 {
				delete(cn.elicitors, e)
			}
		}
	}
}

// soleElicitor is the Elicitor of the connection's only call in flight,
// or nil when that call has none or several calls are in flight (a
// question is never given to a call it may not belong to).
func (cn *conn) soleElicitor() *Elicitor {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.inflight != 1 || len(cn.elicitors) != 1 {
		return nil
	}
	for e := range cn.elicitors {
		return e
	}
	return nil
}

// WithDefaults returns content, a JSON object, with the default of every
// property of the object schema s that it leaves out (SEP-1034: a client
// accepting an elicitation fills in the defaults of what the user did not
// answer).
func WithDefaults(s, content json.RawMessage) (json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(content, &obj); err != nil || obj == nil {
		return nil, errors.New("the answer must be a JSON object")
	}
	var shape struct {
		Properties map[string]struct {
			Default json.RawMessage `json:"default"`
		} `json:"properties"`
	}
	if len(s) > 0 {
		if err := json.Unmarshal(s, &shape); err != nil {
			return nil, fmt.Errorf("the question's schema does not parse: %v", err)
		}
	}
	for name, p := range shape.Properties {
		if _, set := obj[name]; !set && len(p.Default) > 0 {
			obj[name] = p.Default
		}
	}
	return json.Marshal(obj)
}
