package openai

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	json "github.com/go-json-experiment/json/v1"
	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentbus/agentbus/llm"
)

// respondFunction is the one function a tool-forcing call must call: its
// arguments are the answer.
const respondFunction = "respond"

// shape is how one call was asked, for reading its answer back.
type shape struct {
	mode Mode
	kind kind
	// envelope: tools are described in the prompt and the answer is a
	// JSON envelope (see envelopeSchema) rather than native tool calls.
	envelope bool
	// wrapped: the answer schema was not an object and is asked for
	// under "answer".
	wrapped bool
	tools   map[string]bool
}

// kindOf is what req asks for.
func kindOf(req llm.Request) kind {
	switch {
	case len(req.Tools) > 0:
		return kindTools
	case len(req.Schema) > 0:
		return kindSchema
	}
	return kindPlain
}

// passthrough reports whether the answer's text on the wire is the answer
// itself, so that it may be streamed as it comes.
func (s shape) passthrough() bool {
	return s.kind == kindPlain || (!s.wrapped && !s.envelope && s.mode != ModeToolForcing)
}

// native reports whether the answer's tool calls are the server's own.
func (s shape) native() bool {
	return s.kind == kindPlain || (s.kind == kindTools && s.mode == ModeJSONSchema)
}

// applyMode shapes p, built for req without tools nor response format,
// for mode: the response format, the tools, the forced function and, for
// an envelope, the conversation's tool turns as text.
func applyMode(p *sdk.ChatCompletionNewParams, req llm.Request, mode Mode) (shape, error) {
	s := shape{mode: mode, kind: kindOf(req)}
	if s.kind == kindPlain {
		return s, nil
	}
	answer, wrapped, err := answerSchema(req.Schema, s.kind)
	if err != nil {
		return s, err
	}
	s.wrapped = wrapped
	if s.kind == kindTools && mode == ModeJSONSchema {
		if err := nativeTools(p, req.Tools); err != nil {
			return s, err
		}
		s.wrapped = wrapped && len(req.Schema) > 0 // without a schema the answer is free text
		if len(req.Schema) > 0 {
			p.ResponseFormat = jsonSchemaFormat(req.Task, answer)
		}
		return s, nil
	}
	want := answer
	if s.kind == kindTools {
		s.envelope, s.tools = true, map[string]bool{}
		for _, t := range req.Tools {
			s.tools[t.Name] = true
		}
		if want, err = envelopeSchema(req.Tools, answer); err != nil {
			return s, err
		}
	}
	if err := statePrompt(p, req, s, want); err != nil {
		return s, err
	}
	switch mode {
	case ModeJSONSchema:
		p.ResponseFormat = jsonSchemaFormat(req.Task, want)
	case ModeJSONObject:
		obj := shared.NewResponseFormatJSONObjectParam()
		obj.SetExtraFields(map[string]any{"schema": grammarSafe(want)})
		p.ResponseFormat = sdk.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &obj}
	case ModeToolForcing:
		p.Tools = []sdk.ChatCompletionToolUnionParam{sdk.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: respondFunction, Description: param.NewOpt("Give your answer: its arguments are the answer, valid against their JSON Schema."),
			Parameters: grammarSafe(want)})}
		p.ToolChoice = sdk.ChatCompletionToolChoiceOptionUnionParam{OfFunctionToolChoice: &sdk.ChatCompletionNamedToolChoiceParam{
			Function: sdk.ChatCompletionNamedToolChoiceFunctionParam{Name: respondFunction}}}
	}
	return s, nil
}

// nativeTools sends the request's tools as function tools.
func nativeTools(p *sdk.ChatCompletionNewParams, tools []llm.Tool) error {
	for _, t := range tools {
		var params shared.FunctionParameters
		if len(t.Parameters) > 0 {
			if err := json.Unmarshal(t.Parameters, &params); err != nil {
				return fmt.Errorf("%w: tool %s: parameters are not a JSON object: %v", llm.ErrBadInput, t.Name, err)
			}
		}
		p.Tools = append(p.Tools, sdk.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: t.Name, Description: param.NewOpt(t.Description), Parameters: params}))
	}
	return nil
}

func jsonSchemaFormat(task llm.Task, schema map[string]any) sdk.ChatCompletionNewParamsResponseFormatUnion {
	return sdk.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
		JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{
			Name: nameRE.ReplaceAllString(string(task)+"_output", "_"), Schema: schema, Strict: param.NewOpt(false)}}}
}

// answerSchema is the schema of the answer as asked for: req.Schema, or
// a free-text answer for a tools request without one; a schema that is
// not an object is wrapped under "answer" (function arguments and most
// servers' JSON modes are objects).
func answerSchema(raw json.RawMessage, k kind) (map[string]any, bool, error) {
	if len(raw) == 0 {
		if k == kindTools {
			return objectOf("answer", map[string]any{"type": "string"}), true, nil
		}
		return nil, false, nil
	}
	var s map[string]any
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, false, fmt.Errorf("%w: schema: %v", llm.ErrBadInput, err)
	}
	if s["type"] != "object" {
		return objectOf("answer", s), true, nil
	}
	return s, false, nil
}

func objectOf(name string, schema any) map[string]any {
	return map[string]any{"type": "object", "required": []any{name}, "properties": map[string]any{name: schema}}
}

// maxGrammarBound is the largest length or count bound grammarSafe keeps.
const maxGrammarBound = 500

// grammarSafe is a copy of schema for a server that compiles it into a
// grammar: length and count bounds over maxGrammarBound are left out
// (llama.cpp unrolls a bound into nested rules, and a maxLength of 20000
// crashes llama-cpp-python's server). The full schema is still in the
// prompt, and the answer is validated against it.
func grammarSafe(schema map[string]any) map[string]any {
	return withoutLargeBounds(schema).(map[string]any)
}

func withoutLargeBounds(schema any) any {
	switch v := schema.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			switch k {
			case "maxLength", "minLength", "maxItems", "minItems", "maxProperties", "minProperties":
				if n, ok := x.(float64); ok && n > maxGrammarBound {
					continue
				}
			}
			out[k] = withoutLargeBounds(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = withoutLargeBounds(x)
		}
		return out
	}
	return schema
}

// envelopeSchema is the answer of a tools request when the server does
// not take native tools: either {"tool_call": {"name", "arguments"}}, one
// alternative per tool with its parameters, or the answer itself.
func envelopeSchema(tools []llm.Tool, answer map[string]any) (map[string]any, error) {
	calls := make([]any, 0, len(tools))
	for _, t := range tools {
		params := map[string]any{"type": "object"}
		if len(t.Parameters) > 0 {
			if err := json.Unmarshal(t.Parameters, &params); err != nil {
				return nil, fmt.Errorf("%w: tool %s: parameters are not a JSON object: %v", llm.ErrBadInput, t.Name, err)
			}
		}
		calls = append(calls, map[string]any{"type": "object", "description": t.Description, "required": []any{"name", "arguments"},
			"properties": map[string]any{"name": map[string]any{"const": t.Name}, "arguments": params}})
	}
	return map[string]any{"type": "object", "anyOf": []any{objectOf("tool_call", map[string]any{"anyOf": calls}), answer}}, nil
}

// envelopeNote tells the model how to call a tool without native tools.
const envelopeNote = `You call tools by answering with JSON only: {"tool_call": {"name": "<tool name>", "arguments": {...}}}, ` +
	`one call per answer; its result comes back in the next message. When you have what the task needs, answer with the ` +
	`final JSON instead. The JSON Schema below lists both forms and every tool (its description and arguments).`

// statePrompt replaces p's messages by the conversation with want stated
// as the answer's schema, and, for an envelope, the tools and the earlier
// tool turns as text.
func statePrompt(p *sdk.ChatCompletionNewParams, req llm.Request, s shape, want map[string]any) error {
	b, err := json.Marshal(want)
	if err != nil {
		return fmt.Errorf("%w: schema: %v", llm.ErrBadInput, err)
	}
	r := req
	r.Tools, r.Schema = nil, b
	conv, err := llm.Conversation(r)
	if err != nil {
		return err
	}
	if s.envelope && len(conv) > 0 {
		conv[0].Content = envelopeNote + "\n\n" + conv[0].Content
	}
	p.Messages = p.Messages[:0]
	if req.System != "" {
		p.Messages = append(p.Messages, sdk.SystemMessage(req.System))
	}
	for _, msg := range conv {
		if s.envelope {
			msg = asText(msg)
		}
		p.Messages = append(p.Messages, message(msg))
	}
	return nil
}

// envelopeCall is a tool call as an envelope answer carries it.
type envelopeCall struct {
	ToolCall namedArgs `json:"tool_call"`
}

type namedArgs struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// asText renders a tool turn for a server without native tools: a call as
// the envelope the model would have answered, a result as a user message.
func asText(msg llm.Message) llm.Message {
	switch {
	case msg.Role == llm.RoleAssistant && len(msg.ToolCalls) > 0:
		lines := []string{}
		if strings.TrimSpace(msg.Content) != "" {
			lines = append(lines, msg.Content)
		}
		for _, c := range msg.ToolCalls {
			args := c.Arguments
			if len(args) == 0 {
				args = json.RawMessage(`{}`)
			}
			b, _ := json.Marshal(envelopeCall{ToolCall: namedArgs{Name: c.Name, Arguments: args}})
			lines = append(lines, string(b))
		}
		return llm.Message{Role: llm.RoleAssistant, Content: strings.Join(lines, "\n")}
	case msg.Role == llm.RoleTool:
		what := "Result"
		if msg.IsError {
			what = "Error"
		}
		return llm.Message{Role: llm.RoleUser, Content: fmt.Sprintf("%s of tool call %s:\n%s", what, msg.ToolCallID, msg.Content)}
	}
	return msg
}

// read turns the answer's message into agentbus's, as s asked for it.
func (s shape) read(msg sdk.ChatCompletionMessage) llm.Message {
	out := llm.Message{Role: llm.RoleAssistant, Content: msg.Content}
	if s.native() {
		for _, c := range msg.ToolCalls {
			out.ToolCalls = append(out.ToolCalls, llm.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: arguments(c.Function.Arguments)})
		}
		if s.wrapped && len(out.ToolCalls) == 0 {
			out.Content = unwrap(msg.Content)
		}
		return out
	}
	text := msg.Content
	if s.mode == ModeToolForcing {
		for _, c := range msg.ToolCalls {
			if c.Function.Name == respondFunction {
				text = c.Function.Arguments
				break
			}
		}
	}
	if s.envelope {
		if call, ok := s.toolCall(text); ok {
			return llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call}}
		}
	}
	out.Content = text
	if s.wrapped {
		out.Content = unwrap(text)
	}
	return out
}

// toolCall reads an envelope's tool call: {"tool_call": {"name",
// "arguments"}}, or the bare {"name", "arguments"} a small model may
// write, naming one of the request's tools.
func (s shape) toolCall(text string) (llm.ToolCall, bool) {
	var env struct {
		ToolCall *namedArgs `json:"tool_call"`
		namedArgs
	}
	if json.Unmarshal([]byte(llm.ExtractJSON(text)), &env) != nil {
		return llm.ToolCall{}, false
	}
	name, args := env.Name, env.Arguments
	if env.ToolCall != nil {
		name, args = env.ToolCall.Name, env.ToolCall.Arguments
	} else if len(args) == 0 {
		return llm.ToolCall{}, false
	}
	if !s.tools[name] {
		return llm.ToolCall{}, false
	}
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage(`{}`)
	}
	return llm.ToolCall{ID: callID(), Name: name, Arguments: args}, true
}

// unwrap takes the answer out from under "answer"; text that is not such
// an object stays as it is (and fails the schema with a clear message).
func unwrap(text string) string {
	var w struct {
		Answer json.RawMessage `json:"answer"`
	}
	if json.Unmarshal([]byte(llm.ExtractJSON(text)), &w) != nil || len(w.Answer) == 0 {
		return text
	}
	var str string
	if json.Unmarshal(w.Answer, &str) == nil {
		return str
	}
	return string(w.Answer)
}

// callID names a tool call read from an envelope (the server gave none).
func callID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}
