package anthropic

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/bedrock"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/anthropics/anthropic-sdk-go/packages/param"
	"github.com/aws/aws-sdk-go-v2/config"
	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/llm"
)

// respondTool is the tool a structured answer is given through.
const respondTool = "respond"

// Model is a Claude model on Anthropic's API or on Bedrock.
type Model struct {
	client   sdk.Client
	cfg      llm.ProviderConfig
	provider string
}

var _ llm.Model = (*Model)(nil)

// MaxOutputTokens is the configured output limit of one call.
func (m *Model) MaxOutputTokens() int { return m.cfg.MaxTokens }

// New returns the model cfg.Model of Anthropic's Messages API (or the
// server at cfg.BaseURL). An empty cfg.APIKey leaves the SDK's
// ANTHROPIC_API_KEY.
func New(cfg llm.ProviderConfig) (*Model, error) {
	if cfg.Model == "" {
		return nil, errors.New("anthropic: no model id")
	}
	opts := common(&cfg)
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	return &Model{client: sdk.NewClient(opts...), cfg: cfg, provider: "anthropic"}, nil
}

// NewBedrock returns the model cfg.Model on Amazon Bedrock, with AWS
// credentials and region from the standard chain (cfg.Region wins).
// cfg.BaseURL, when set, replaces the regional endpoint.
func NewBedrock(ctx context.Context, cfg llm.ProviderConfig) (*Model, error) {
	if cfg.Model == "" {
		return nil, errors.New("bedrock: no model id")
	}
	var load []func(*config.LoadOptions) error
	if cfg.Region != "" {
		load = append(load, config.WithRegion(cfg.Region))
	}
	if cfg.HTTPClient != nil {
		load = append(load, config.WithHTTPClient(cfg.HTTPClient))
	}
	aws, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("bedrock: AWS configuration: %w", err)
	}
	if aws.Region == "" {
		return nil, errors.New("bedrock: no AWS region (set BEDROCK_REGION or AWS_REGION)")
	}
	opts := append(common(&cfg), bedrock.WithConfig(aws))
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	return &Model{client: sdk.NewClient(opts...), cfg: cfg, provider: "bedrock"}, nil
}

// common resolves cfg's defaults and returns the options both endpoints
// take. cfg is resolved at most once: a resolved MaxRetries of 0 means none.
func common(cfg *llm.ProviderConfig) []option.RequestOption {
	*cfg = cfg.Resolved()
	opts := []option.RequestOption{option.WithMaxRetries(cfg.MaxRetries), option.WithRequestTimeout(cfg.Timeout)}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	return opts
}

// Complete sends req as one Messages call, streamed when req.Stream is set.
func (m *Model) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	params, wrapped, err := m.params(req)
	if err != nil {
		return llm.Response{}, err
	}
	var msg *sdk.Message
	if req.Stream != nil {
		msg, err = m.stream(ctx, params, req.Stream)
	} else {
		msg, err = m.client.Messages.New(ctx, params)
	}
	if err != nil {
		return llm.Response{}, m.failure(ctx, err)
	}
	return m.response(msg, wrapped)
}

// stream runs a streaming call, handing text deltas to onDelta, and
// returns the accumulated message.
func (m *Model) stream(ctx context.Context, params sdk.MessageNewParams, onDelta func(string)) (*sdk.Message, error) {
	s := m.client.Messages.NewStreaming(ctx, params)
	defer s.Close()
	var msg sdk.Message
	for s.Next() {
		ev := s.Current()
		if err := msg.Accumulate(ev); err != nil {
			return nil, err
		}
		if ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" && ev.Delta.Text != "" {
			onDelta(ev.Delta.Text)
		}
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	return &msg, nil
}

// params builds the request. wrapped says the answer schema was not an
// object and was wrapped under "answer" (a tool's input is an object).
func (m *Model) params(req llm.Request) (sdk.MessageNewParams, bool, error) {
	conv, err := llm.Conversation(req)
	if err != nil {
		return sdk.MessageNewParams{}, false, err
	}
	p := sdk.MessageNewParams{Model: sdk.Model(m.cfg.ResolveModel(req.Model)), MaxTokens: int64(llm.CapTokens(m.cfg.MaxTokens, req.MaxTokens)), Messages: messages(conv)}
	if t := m.cfg.TemperatureFor(req); t != nil {
		p.Temperature = param.NewOpt(*t)
	}
	if req.TopP != nil {
		p.TopP = param.NewOpt(*req.TopP)
	}
	p.StopSequences = req.Stop
	if req.System != "" {
		p.System = []sdk.TextBlockParam{{Text: req.System}}
	}
	for _, t := range req.Tools {
		tool, err := toolParam(t.Name, t.Description, t.Parameters)
		if err != nil {
			return p, false, err
		}
		p.Tools = append(p.Tools, tool)
	}
	wrapped := false
	if len(req.Schema) > 0 {
		schema := req.Schema
		if !isObjectSchema(schema) {
			schema = json.RawMessage(`{"type":"object","properties":{"answer":` + string(schema) + `},"required":["answer"]}`)
			wrapped = true
		}
		tool, err := toolParam(respondTool, "Give your answer. Its input is the answer, valid against the answer's JSON Schema.", schema)
		if err != nil {
			return p, false, err
		}
		p.Tools = append(p.Tools, tool)
		if len(req.Tools) == 0 {
			p.ToolChoice = sdk.ToolChoiceParamOfTool(respondTool)
		} else {
			p.ToolChoice = sdk.ToolChoiceUnionParam{OfAny: &sdk.ToolChoiceAnyParam{}}
		}
	}
	return p, wrapped, nil
}

// toolParam turns a JSON Schema into a tool definition.
func toolParam(name, description string, schema json.RawMessage) (sdk.ToolUnionParam, error) {
	var s map[string]any
	if len(schema) > 0 {
		if err := json.Unmarshal(schema, &s); err != nil {
			return sdk.ToolUnionParam{}, fmt.Errorf("%w: tool %s: schema is not a JSON object: %v", llm.ErrBadInput, name, err)
		}
	}
	in := sdk.ToolInputSchemaParam{Properties: s["properties"], ExtraFields: map[string]any{}}
	if req, ok := s["required"].([]any); ok {
		for _, r := range req {
			if name, ok := r.(string); ok {
				in.Required = append(in.Required, name)
			}
		}
	}
	for k, v := range s {
		if k != "type" && k != "properties" && k != "required" {
			in.ExtraFields[k] = v
		}
	}
	tool := sdk.ToolUnionParamOfTool(in, name)
	if description != "" {
		tool.OfTool.Description = param.NewOpt(description)
	}
	return tool, nil
}

func isObjectSchema(schema json.RawMessage) bool {
	var s struct {
		Type any `json:"type"`
	}
	return json.Unmarshal(schema, &s) == nil && s.Type == "object"
}

// messages converts the conversation, merging consecutive messages of one
// role (the API wants the roles to alternate) and putting tool results
// first in a user message.
func messages(conv []llm.Message) []sdk.MessageParam {
	var out []sdk.MessageParam
	add := func(role sdk.MessageParamRole, blocks ...sdk.ContentBlockParamUnion) {
		if n := len(out); n > 0 && out[n-1].Role == role {
			if role == sdk.MessageParamRoleUser && blocks[0].OfToolResult != nil {
				out[n-1].Content = append(blocks, out[n-1].Content...)
			} else {
				out[n-1].Content = append(out[n-1].Content, blocks...)
			}
			return
		}
		out = append(out, sdk.MessageParam{Role: role, Content: blocks})
	}
	for _, msg := range conv {
		switch msg.Role {
		case llm.RoleAssistant:
			var blocks []sdk.ContentBlockParamUnion
			if msg.Content != "" {
				blocks = append(blocks, sdk.NewTextBlock(msg.Content))
			}
			for _, c := range msg.ToolCalls {
				blocks = append(blocks, sdk.NewToolUseBlock(c.ID, c.Arguments, c.Name))
			}
			if len(blocks) > 0 {
				add(sdk.MessageParamRoleAssistant, blocks...)
			}
		case llm.RoleTool:
			add(sdk.MessageParamRoleUser, sdk.NewToolResultBlock(msg.ToolCallID, msg.Content, msg.IsError))
		default:
			add(sdk.MessageParamRoleUser, sdk.NewTextBlock(msg.Content))
		}
	}
	return out
}

// response converts the answer: text blocks joined as the content, a call
// of the respond tool as the (structured) content, other tool uses as
// tool calls.
func (m *Model) response(msg *sdk.Message, wrapped bool) (llm.Response, error) {
	out := llm.Message{Role: llm.RoleAssistant}
	var text []string
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text = append(text, b.Text)
		case "tool_use":
			args := compact(json.RawMessage(b.Input))
			if b.Name != respondTool {
				out.ToolCalls = append(out.ToolCalls, llm.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
				continue
			}
			if wrapped {
				var w struct {
					Answer json.RawMessage `json:"answer"`
				}
				if json.Unmarshal(args, &w) == nil && len(w.Answer) > 0 {
					args = w.Answer
				}
			}
			out.Content = string(args)
		}
	}
	if out.Content == "" {
		out.Content = strings.Join(text, "")
	}
	model := string(msg.Model)
	if model == "" {
		model = m.cfg.Model
	}
	cached := msg.Usage.CacheReadInputTokens
	return llm.Response{Message: out, Model: model, Provider: m.provider, Usage: llm.Usage{
		InputTokens:       int(msg.Usage.InputTokens + cached + msg.Usage.CacheCreationInputTokens),
		OutputTokens:      int(msg.Usage.OutputTokens),
		CachedInputTokens: int(cached)}}, nil
}

// failure classifies a failed call: the caller's own cancellation stays
// what it is; anything else (an HTTP error after the retries, a refused
// connection, a timeout, missing AWS credentials) is the provider being
// unavailable. The text names the status and the server's message; it
// never holds the request's headers.
func (m *Model) failure(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %s: %w", m.provider, m.cfg.Model, ctx.Err())
	}
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) && apiErr.Response != nil {
		return fmt.Errorf("%s: %s: %w: %d %s: %s", m.provider, m.cfg.Model, llm.ErrUnavailable,
			apiErr.StatusCode, apiErr.Type(), truncate(apiErr.RawJSON(), 500))
	}
	return fmt.Errorf("%s: %s: %w: %v", m.provider, m.cfg.Model, llm.ErrUnavailable, err)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// compact returns raw JSON without insignificant whitespace, so tool
// arguments and structured answers read the same whatever the wire
// formatting; empty input is the empty object.
func compact(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage(`{}`)
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}
