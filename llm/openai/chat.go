package openai

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
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
// set. A request with a schema or tools is shaped by the mode remembered
// for this server and model; until one has worked, the modes are tried
// down the Ladder, each refusal (see refused) moving to the next, and the
// first that works is remembered for the process. The mode used is the
// response's StructuredMode.
func (m *Model) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	k := kindOf(req)
	if k == kindPlain {
		return m.send(ctx, req, "")
	}
	key := modeKey{baseURL: m.cfg.BaseURL, model: m.cfg.ResolveModel(req.Model), kind: k}
	r := remembered.start(key)
	if r.confirmed {
		return m.send(ctx, req, Ladder[r.at])
	}
	return m.climb(ctx, req, key, r.at)
}

// climb tries req in each mode from the ladder's index at down until the
// server takes one; that mode is remembered for key. A refusal moves to
// the next mode at once (it is not retried); any other failure is retried
// as the client retries and ends the climb.
func (m *Model) climb(ctx context.Context, req llm.Request, key modeKey, at int) (llm.Response, error) {
	var first error
	for i := at; i < len(Ladder); i++ {
		resp, err := m.send(ctx, req, Ladder[i], option.WithMiddleware(refusalsFinal))
		switch {
		case err == nil:
			remembered.confirm(key, i)
			return resp, nil
		case errors.Is(err, llm.ErrBadInput) || errors.Is(err, llm.ErrUnavailable):
			return resp, err
		case ctx.Err() != nil || !refused(err):
			return resp, m.failure(ctx, err)
		}
		first = cmp.Or(first, err)
	}
	// Every mode refused: the failure may be the server's rather than the
	// shape's (a 500 of an overloaded server): the first mode once more,
	// with the call's retries, and nothing remembered.
	if m.cfg.MaxRetries > 0 {
		resp, err := m.send(ctx, req, Ladder[at])
		if err == nil {
			return resp, nil
		}
		first = err
	} else {
		first = m.failure(ctx, first)
	}
	return llm.Response{StructuredMode: string(Ladder[at])},
		fmt.Errorf("%w (refused in every structured mode from %s)", first, Ladder[at])
}

// refusalsFinal marks a refusal's answer as not to be retried (the SDK
// honours x-should-retry): the ladder tries the next mode instead.
// Everything else keeps the client's retries, Retry-After included.
func refusalsFinal(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	resp, err := next(r)
	if err == nil && refusedStatus(resp.StatusCode) {
		resp.Header.Set("x-should-retry", "false")
	}
	return resp, err
}

// send makes one call of req in mode ("" for a plain request) with the
// client's options and opts.
func (m *Model) send(ctx context.Context, req llm.Request, mode Mode, opts ...option.RequestOption) (llm.Response, error) {
	params, err := m.params(req)
	if err != nil {
		return llm.Response{}, err
	}
	s, err := applyMode(&params, req, mode)
	if err != nil {
		return llm.Response{}, err
	}
	var cc *sdk.ChatCompletion
	if req.Stream != nil && s.passthrough() {
		cc, err = m.stream(ctx, params, req.Stream, opts)
	} else {
		cc, err = m.client.Chat.Completions.New(ctx, params, opts...)
	}
	failed := llm.Response{StructuredMode: string(mode)}
	if err != nil {
		if len(opts) > 0 {
			return failed, err // a probe: the caller classifies the raw error
		}
		return failed, m.failure(ctx, err)
	}
	if len(cc.Choices) == 0 {
		return failed, fmt.Errorf("openai: %s: %w: the answer has no choice", m.cfg.Model, llm.ErrUnavailable)
	}
	resp := m.response(cc, s)
	if req.Stream != nil && !s.passthrough() && resp.Message.Content != "" {
		req.Stream(resp.Message.Content) // not streamed on the wire: the whole text at once
	}
	return resp, nil
}

// stream runs a streaming completion, handing content deltas to onDelta,
// and returns the accumulated completion with its usage.
func (m *Model) stream(ctx context.Context, params sdk.ChatCompletionNewParams, onDelta func(string), opts []option.RequestOption) (*sdk.ChatCompletion, error) {
	params.StreamOptions = sdk.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)}
	s := m.client.Chat.Completions.NewStreaming(ctx, params, opts...)
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

// params builds the request body without tools or response format
// (applyMode adds them).
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

// response converts the first choice, read as s asked for it, and the
// usage.
func (m *Model) response(cc *sdk.ChatCompletion, s shape) llm.Response {
	out := s.read(cc.Choices[0].Message)
	model := cc.Model
	if model == "" {
		model = m.cfg.Model
	}
	return llm.Response{Message: out, Model: model, Provider: "openai", StructuredMode: string(s.mode), Usage: llm.Usage{
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
	if err == nil || errors.Is(err, llm.ErrUnavailable) {
		return err
	}
	if ctx.Err() != nil {
		return fmt.Errorf("openai: %s: %w", m.cfg.Model, ctx.Err())
	}
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		return fmt.Errorf("openai: %s: %w: %s: %s", m.cfg.Model, llm.ErrUnavailable, apiErr.Error(), apiErr.Message)
	}
	return fmt.Errorf("openai: %s: %w: %v", m.cfg.Model, llm.ErrUnavailable, err)
}
