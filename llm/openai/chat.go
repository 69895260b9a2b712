package openai

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	json "github.com/go-json-experiment/json/v1"
	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentbus/agentbus/llm"
)

// Model is a chat model of an OpenAI-compatible server.
type Model struct {
	client sdk.Client
	cfg    llm.ProviderConfig
}

var _ llm.Model = (*Model)(nil)

// New returns the model cfg.Model of the server at cfg.BaseURL (OpenAI's
// when empty). An empty cfg.APIKey leaves the SDK's OPENAI_API_KEY.
func New(cfg llm.ProviderConfig) (*Model, error) {
	if cfg.Model == "" {
		return nil, errors.New("openai: no model id")
	}
	cfg = cfg.Resolved()
	return &Model{client: sdk.NewClient(clientOptions(cfg)...), cfg: cfg}, nil
}

// MaxOutputTokens is the configured output limit of one call.
func (m *Model) MaxOutputTokens() int { return m.cfg.MaxTokens }

// clientOptions turns a resolved cfg into SDK options: endpoint, key,
// retries, per-attempt timeout and HTTP client.
func clientOptions(cfg llm.ProviderConfig) []option.RequestOption {
	opts := []option.RequestOption{option.WithMaxRetries(cfg.MaxRetries), option.WithRequestTimeout(cfg.Timeout)}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	return opts
}

// Complete sends req as one chat completion, streamed when req.Stream is
// set.
func (m *Model) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	params, err := m.params(req)
	if err != nil {
		return llm.Response{}, err
	}
	var cc *sdk.ChatCompletion
	if req.Stream != nil {
		cc, err = m.stream(ctx, params, req.Stream)
	} else {
		cc, err = m.client.Chat.Completions.New(ctx, params)
	}
	if err != nil {
		return llm.Response{}, m.failure(ctx, err)
	}
	if len(cc.Choices) == 0 {
		return llm.Response{}, fmt.Errorf("openai: %s: %w: the answer has no choice", m.cfg.Model, llm.ErrUnavailable)
	}
	return m.response(cc), nil
}

// stream runs a streaming completion, handing content deltas to onDelta,
// and returns the accumulated completion with its usage.
func (m *Model) stream(ctx context.Context, params sdk.ChatCompletionNewParams, onDelta func(string)) (*sdk.ChatCompletion, error) {
	params.StreamOptions = sdk.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)}
	s := m.client.Chat.Completions.NewStreaming(ctx, params)
	defer s.Close()
	var acc sdk.ChatCompletionAccumulator
	for s.Next() {
		chunk := s.Current()
		acc.AddChunk(chunk)
		for _, c := range chunk.Choices {
			if c.Delta.Content != "" {
				onDelta(c.Delta.Content)
			}
		}
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	return &acc.ChatCompletion, nil
}

var nameRE = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

// params builds the request body.
func (m *Model) params(req llm.Request) (sdk.ChatCompletionNewParams, error) {
	conv, err := llm.Conversation(req)
	if err != nil {
		return sdk.ChatCompletionNewParams{}, err
	}
	p := sdk.ChatCompletionNewParams{Model: shared.ChatModel(m.cfg.ResolveModel(req.Model)),
		MaxCompletionTokens: param.NewOpt(int64(llm.CapTokens(m.cfg.MaxTokens, req.MaxTokens)))}
	if t := m.cfg.TemperatureFor(req); t != nil {
		p.Temperature = param.NewOpt(*t)
	}
	if req.TopP != nil {
		p.TopP = param.NewOpt(*req.TopP)
	}
	if len(req.Stop) > 0 {
		p.Stop = sdk.ChatCompletionNewParamsStopUnion{OfStringArray: req.Stop}
	}
	if req.System != "" {
		p.Messages = append(p.Messages, sdk.SystemMessage(req.System))
	}
	for _, msg := range conv {
		p.Messages = append(p.Messages, message(msg))
	}
	for _, t := range req.Tools {
		var params shared.FunctionParameters
		if len(t.Parameters) > 0 {
			if err := json.Unmarshal(t.Parameters, &params); err != nil {
				return p, fmt.Errorf("%w: tool %s: parameters are not a JSON object: %v", llm.ErrBadInput, t.Name, err)
			}
		}
		p.Tools = append(p.Tools, sdk.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: t.Name, Description: param.NewOpt(t.Description), Parameters: params}))
	}
	if len(req.Schema) > 0 {
		var schema map[string]any
		if err := json.Unmarshal(req.Schema, &schema); err != nil {
			return p, fmt.Errorf("%w: schema: %v", llm.ErrBadInput, err)
		}
		p.ResponseFormat = sdk.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{
				Name: nameRE.ReplaceAllString(string(req.Task)+"_output", "_"), Schema: schema, Strict: param.NewOpt(false)}}}
	}
	return p, nil
}

// message converts one conversation message.
func message(msg llm.Message) sdk.ChatCompletionMessageParamUnion {
	switch msg.Role {
	case llm.RoleSystem:
		return sdk.SystemMessage(msg.Content)
	case llm.RoleTool:
		return sdk.ToolMessage(msg.Content, msg.ToolCallID)
	case llm.RoleAssistant:
		a := sdk.ChatCompletionAssistantMessageParam{}
		if msg.Content != "" {
			a.Content.OfString = param.NewOpt(msg.Content)
		}
		for _, c := range msg.ToolCalls {
			a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{ID: c.ID,
					Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: string(c.Arguments)}}})
		}
		return sdk.ChatCompletionMessageParamUnion{OfAssistant: &a}
	}
	return sdk.UserMessage(msg.Content)
}

// response converts the first choice and the usage.
func (m *Model) response(cc *sdk.ChatCompletion) llm.Response {
	msg := cc.Choices[0].Message
	out := llm.Message{Role: llm.RoleAssistant, Content: msg.Content}
	for _, c := range msg.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, llm.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: arguments(c.Function.Arguments)})
	}
	model := cc.Model
	if model == "" {
		model = m.cfg.Model
	}
	return llm.Response{Message: out, Model: model, Provider: "openai", Usage: llm.Usage{
		InputTokens: int(cc.Usage.PromptTokens), OutputTokens: int(cc.Usage.CompletionTokens),
		CachedInputTokens: int(cc.Usage.PromptTokensDetails.CachedTokens)}}
}

// arguments keeps a tool call's arguments as JSON: a string that is not
// JSON becomes a JSON string, which then fails the tool's input schema
// with a clear message instead of breaking the turn's encoding.
func arguments(s string) json.RawMessage {
	if s == "" {
		return json.RawMessage(`{}`)
	}
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

// failure classifies a failed call: the caller's own cancellation stays
// what it is; anything else (an HTTP error after the retries, a refused
// connection, a timeout) is the provider being unavailable. The SDK's
// error text holds the status, never the request's headers; the server's
// message is added.
func (m *Model) failure(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("openai: %s: %w", m.cfg.Model, ctx.Err())
	}
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		return fmt.Errorf("openai: %s: %w: %s: %s", m.cfg.Model, llm.ErrUnavailable, apiErr.Error(), apiErr.Message)
	}
	return fmt.Errorf("openai: %s: %w: %v", m.cfg.Model, llm.ErrUnavailable, err)
}
