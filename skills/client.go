package skills

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// TenantPlaceholder is the token in Config.URL that is replaced by the
// (URL-path-escaped) tenant id on every call.
const TenantPlaceholder = "{tenant}"

// DefaultTimeout is the per-call timeout used when Config.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// apiKeyHeader carries Config.APIKey to the Skill Service.
const apiKeyHeader = "X-Api-Key"

// clientName and clientVersion identify this client to Skill Services.
const (
	clientName    = "agentbus-skills"
	clientVersion = "1.0.0"
)

// Config configures a Client.
type Config struct {
	// URL is the Skill Service endpoint, e.g.
	// http://127.0.0.1:7070/tenants/{tenant}/mcp. It must contain
	// "{tenant}", which is replaced per call by the tenant id
	// (URL-path-escaped).
	URL string
	// APIKey is optional; it is sent as the X-Api-Key header and is never
	// included in any error string.
	APIKey string
	// Timeout bounds each call, including session set-up. Default 30s.
	Timeout time.Duration
}

// Client calls skills on a Skill Service over MCP streamable HTTP. It keeps
// one initialized MCP session per resolved URL, created lazily and reused by
// all calls. A Client is safe for concurrent use.
type Client struct {
	cfg        Config
	httpClient *http.Client

	mu       sync.Mutex
	closed   bool
	sessions map[string]*session
}

// session is the lazily initialized MCP connection to one resolved URL.
type session struct {
	mu sync.Mutex
	mc *mcpclient.Client // nil until initialized
}

// NewClient validates cfg, applies defaults and returns a Client. No
// connection is made until the first call.
func NewClient(cfg Config) (*Client, error) {
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("%w: negative timeout", ErrInvalidConfig)
	}
	if !strings.Contains(cfg.URL, TenantPlaceholder) {
		return nil, fmt.Errorf("%w: URL must contain %s", ErrInvalidConfig, TenantPlaceholder)
	}
	u, err := url.Parse(strings.ReplaceAll(cfg.URL, TenantPlaceholder, "tenant"))
	if err != nil {
		return nil, fmt.Errorf("%w: URL does not parse", ErrInvalidConfig)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: URL must be an absolute http(s) URL", ErrInvalidConfig)
	}
	return &Client{
		cfg:        cfg,
		httpClient: &http.Client{},
		sessions:   make(map[string]*session),
	}, nil
}

// Find asks the tenant's Skill Service for the skills most relevant to query
// (find_relevant_skills). A limit <= 0 lets the service choose.
func (c *Client) Find(ctx context.Context, tenant, query string, limit int) ([]Summary, error) {
	args := map[string]any{"query": query}
	if limit > 0 {
		args["limit"] = limit
	}
	text, err := c.callTool(ctx, tenant, ToolFindRelevantSkills, args, "")
	if err != nil {
		return nil, c.redact(fmt.Errorf("skills: find for tenant %q: %w", tenant, err))
	}
	var out struct {
		Skills []Summary `json:"skills"`
	}
	if err := json.Unmarshal(text, &out); err != nil {
		return nil, c.redact(fmt.Errorf("skills: find for tenant %q: %w: %v", tenant, ErrInvalidResponse, err))
	}
	return out.Skills, nil
}

// Load returns the Manifest of skill name from the tenant's catalog
// (load_skill). A skill outside the catalog yields an error wrapping
// ErrSkillNotFound.
func (c *Client) Load(ctx context.Context, tenant, name string) (Manifest, error) {
	text, err := c.callTool(ctx, tenant, ToolLoadSkill, map[string]any{"name": name}, "")
	if err != nil {
		return Manifest{}, c.redact(fmt.Errorf("skills: load %q for tenant %q: %w", name, tenant, err))
	}
	var m Manifest
	if err := json.Unmarshal(text, &m); err != nil {
		return Manifest{}, c.redact(fmt.Errorf("skills: load %q for tenant %q: %w: %v", name, tenant, ErrInvalidResponse, err))
	}
	if m.Name == "" {
		return Manifest{}, fmt.Errorf("skills: load %q for tenant %q: %w: manifest has no name", name, tenant, ErrInvalidResponse)
	}
	return m, nil
}

// Call invokes skill name for tenant with args (a JSON object; empty means
// {}) and returns the text content of the result. idempotencyKey, when not
// empty, is sent in the request's _meta as "idempotency_key"; services use it
// to deduplicate, since a call that fails with a transport error is retried
// once on a fresh session. A tool error yields an error wrapping
// ErrSkillFailed with the tool's message; a skill unknown to the tenant
// yields an error wrapping ErrSkillNotFound.
func (c *Client) Call(ctx context.Context, tenant, name string, args json.RawMessage, idempotencyKey string) ([]byte, error) {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 {
		trimmed = []byte("{}")
	}
	if !json.Valid(trimmed) || trimmed[0] != '{' {
		return nil, fmt.Errorf("skills: call %q for tenant %q: %w: must be a JSON object", name, tenant, ErrInvalidArguments)
	}
	text, err := c.callTool(ctx, tenant, name, json.RawMessage(trimmed), idempotencyKey)
	if err != nil {
		return nil, c.redact(fmt.Errorf("skills: call %q for tenant %q: %w", name, tenant, err))
	}
	return text, nil
}

// Close closes every session. Calls made after Close fail with ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	sessions := c.sessions
	c.sessions = make(map[string]*session)
	c.mu.Unlock()

	var errs []error
	for _, s := range sessions {
		s.mu.Lock()
		if s.mc != nil {
			if err := s.mc.Close(); err != nil {
				errs = append(errs, err)
			}
			s.mc = nil
		}
		s.mu.Unlock()
	}
	return c.redact(errors.Join(errs...))
}

// resolve validates tenant and returns the tenant's endpoint URL.
func (c *Client) resolve(tenant string) (string, error) {
	if !ValidTenant(tenant) {
		return "", ErrInvalidTenant
	}
	return strings.ReplaceAll(c.cfg.URL, TenantPlaceholder, url.PathEscape(tenant)), nil
}

// callTool runs one tools/call on the tenant's session and returns the text
// content of a successful result. A transport failure discards the session
// and retries once on a fresh one.
func (c *Client) callTool(ctx context.Context, tenant, name string, args any, idempotencyKey string) ([]byte, error) {
	endpoint, err := c.resolve(tenant)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()

	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	if idempotencyKey != "" {
		req.Params.Meta = &mcp.Meta{AdditionalFields: map[string]any{MetaIdempotencyKey: idempotencyKey}}
	}

	var result *mcp.CallToolResult
	for attempt := 0; ; attempt++ {
		mc, err := c.session(ctx, endpoint)
		if err != nil {
			return nil, err
		}
		result, err = mc.CallTool(ctx, req)
		if err == nil {
			break
		}
		var terr *transport.Error
		if errors.As(err, &terr) {
			c.discard(endpoint, mc)
			if attempt == 0 && ctx.Err() == nil {
				continue
			}
		}
		if errors.Is(err, mcp.ErrInvalidParams) && strings.Contains(err.Error(), "not found") {
			return nil, fmt.Errorf("%w: %w", ErrSkillNotFound, err)
		}
		return nil, err
	}
	text := resultText(result)
	if result.IsError {
		msg := strings.TrimSpace(string(text))
		if rest, ok := strings.CutPrefix(msg, notFoundMessage); ok {
			return nil, fmt.Errorf("%w%s", ErrSkillNotFound, rest)
		}
		if msg == "" {
			msg = "tool returned an error without a message"
		}
		return nil, fmt.Errorf("%w: %s", ErrSkillFailed, msg)
	}
	if text == nil {
		return nil, fmt.Errorf("%w: result has no text content", ErrInvalidResponse)
	}
	return text, nil
}

// resultText concatenates the text content items of r. When there are none
// it falls back to the structured content encoded as JSON; it returns nil
// when neither is present.
func resultText(r *mcp.CallToolResult) []byte {
	var buf []byte
	found := false
	for _, content := range r.Content {
		if tc, ok := mcp.AsTextContent(content); ok {
			buf = append(buf, tc.Text...)
			found = true
		}
	}
	if found {
		return buf
	}
	if r.StructuredContent != nil {
		if b, err := json.Marshal(r.StructuredContent); err == nil {
			return b
		}
	}
	return nil
}

// session returns the initialized MCP client for endpoint, creating and
// initializing it if needed.
func (c *Client) session(ctx context.Context, endpoint string) (*mcpclient.Client, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	s := c.sessions[endpoint]
	if s == nil {
		s = &session{}
		c.sessions[endpoint] = s
	}
	c.mu.Unlock()

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mc != nil {
		return s.mc, nil
	}
	mc, err := c.connect(ctx, endpoint)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		_ = mc.Close()
		return nil, ErrClosed
	}
	s.mc = mc
	return mc, nil
}

// connect opens and initializes a new MCP session to endpoint.
func (c *Client) connect(ctx context.Context, endpoint string) (*mcpclient.Client, error) {
	opts := []transport.StreamableHTTPCOption{
		transport.WithHTTPBasicClient(c.httpClient),
		transport.WithHTTPLogger(slog.New(slog.DiscardHandler)),
	}
	if c.cfg.APIKey != "" {
		opts = append(opts, transport.WithHTTPHeaders(map[string]string{apiKeyHeader: c.cfg.APIKey}))
	}
	trans, err := transport.NewStreamableHTTP(endpoint, opts...)
	if err != nil {
		return nil, fmt.Errorf("skills: create transport: %w", err)
	}
	mc := mcpclient.NewClient(trans)
	if err := mc.Start(ctx); err != nil {
		_ = mc.Close()
		return nil, fmt.Errorf("skills: start session: %w", err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: clientName, Version: clientVersion}
	if _, err := mc.Initialize(ctx, init); err != nil {
		_ = mc.Close()
		return nil, fmt.Errorf("skills: initialize session: %w", err)
	}
	return mc, nil
}

// discard drops mc as the session for endpoint if it still is, so that the
// next call starts a new one.
func (c *Client) discard(endpoint string, mc *mcpclient.Client) {
	c.mu.Lock()
	s := c.sessions[endpoint]
	c.mu.Unlock()
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mc == mc {
		s.mc = nil
		_ = mc.Close()
	}
}

// redact replaces the API key in err's message. The returned error still
// wraps err for errors.Is and errors.As.
func (c *Client) redact(err error) error {
	if err == nil || c.cfg.APIKey == "" || !strings.Contains(err.Error(), c.cfg.APIKey) {
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), c.cfg.APIKey, "[REDACTED]"), err: err}
}

// redactedError is an error whose message has had a secret removed.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }

func (e *redactedError) Unwrap() error { return e.err }
