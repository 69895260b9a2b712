package skills

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	json "github.com/go-json-experiment/json/v1"
	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/agentbus/agentbus/egress"
)

// TenantPlaceholder is the token in Config.URL that is replaced by the
// (URL-path-escaped) tenant id on every call.
const TenantPlaceholder = "{tenant}"

// DefaultTimeout is the per-call timeout used when Config.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// DefaultToolsTTL is how long a tools/list answer is reused when
// Config.ToolsTTL is zero.
const DefaultToolsTTL = 30 * time.Second

// Transports of Config.Transport.
const (
	// TransportStreamableHTTP is MCP streamable HTTP (the default).
	TransportStreamableHTTP = "streamable-http"
	// TransportSSE is the legacy MCP HTTP+SSE transport: a GET event
	// stream plus a message endpoint the server announces on it.
	TransportSSE = "sse"
	// TransportStdio launches Config.Command and speaks MCP on its stdin
	// and stdout.
	TransportStdio = "stdio"
)

// Modes of Config.Mode: how the server's tools become skills.
const (
	// ModeAuto picks ModeSkillService when the server's tools/list holds
	// find_relevant_skills and load_skill, and ModePlain otherwise (the
	// default).
	ModeAuto = "auto"
	// ModeSkillService uses the server's find_relevant_skills and
	// load_skill; skills run with tools/call.
	ModeSkillService = "skill-service"
	// ModePlain turns any MCP server's tools/list into the catalog: Find
	// ranks the tools locally, Load builds a Manifest from a tool, and
	// Call is tools/call.
	ModePlain = "plain"
)

// apiKeyHeader carries the API key to the server on HTTP transports.
const apiKeyHeader = "X-Api-Key"

// clientName and clientVersion identify this client to MCP servers.
const (
	clientName    = "agentbus-skills"
	clientVersion = "1.0.0"
)

// Config configures a Client.
type Config struct {
	// Transport is TransportStreamableHTTP (default), TransportSSE or
	// TransportStdio.
	Transport string
	// Mode is ModeAuto (default), ModeSkillService or ModePlain.
	Mode string

	// URL is the endpoint of the HTTP transports, an absolute http(s) URL,
	// e.g. http://127.0.0.1:7070/tenants/{tenant}/mcp (streamable HTTP) or
	// http://127.0.0.1:7070/tenants/{tenant}/sse (SSE). "{tenant}", when
	// present, is replaced per call by the tenant id (URL-path-escaped), so
	// the server scopes the catalog per tenant; without it every tenant
	// reaches the same endpoint. Must be empty for stdio.
	URL string
	// APIKey is optional; on HTTP transports it is sent as the X-Api-Key
	// header unless the call's context carries a key (WithAPIKey). It is
	// never included in any error string.
	APIKey string

	// Command is the stdio server's command line: the program and its
	// arguments. A stdio server is single-scope: the Client runs one
	// process for the configured command and sends every tenant's calls
	// to it; there is no tenant substitution (tenant ids are still
	// validated). Required for stdio, empty otherwise.
	Command []string
	// Env holds "NAME=value" entries added to the stdio server's
	// environment. The process does not inherit the caller's environment
	// beyond a few basics (PATH, HOME, USER, LOGNAME, SHELL, TERM, TMPDIR,
	// LANG), so secrets of this process do not leak to it.
	Env []string

	// Timeout bounds each call, including session set-up. Default 30s.
	Timeout time.Duration
	// ToolsTTL is how long a session reuses a tools/list answer (auto and
	// plain modes). It is a cache, not state: an expired or failed list is
	// fetched again. Default 30s.
	ToolsTTL time.Duration

	// OAuth, when set, authenticates the client to an HTTP server that
	// asks for a bearer token (401): the client_credentials grant, or the
	// authorization_code grant with OAuthAuthorizer, with the
	// authorization server the server's metadata names (see oauth.go).
	// Its secrets never appear in an error.
	OAuth *ClientCredentials
	// OAuthByTenant are credentials of tenants of their own (with "*" the
	// default of the others), in place of OAuth.
	OAuthByTenant map[string]*ClientCredentials
	// OAuthAuthorizer, when set, takes the user to an authorization
	// server for the authorization_code grant, which OAuthRedirectURI
	// (required with it) receives.
	OAuthAuthorizer  Authorizer
	OAuthRedirectURI string
	// Egress is the policy of the OAuth requests to the URLs a server
	// names (its protected-resource metadata, its authorization server's
	// metadata, registration and token endpoints), checked on each address
	// they dial; nil is egress.Default(). The server's own origin (URL's,
	// which the operator configured) is not held to it.
	Egress *egress.Policy

	// ProtocolVersion, when set, is the MCP revision the client asks for
	// (for example "2025-11-25"); by default the newest the client knows,
	// falling back to what the server supports.
	ProtocolVersion string

	// Attachments stores the data of a result's images, audio and
	// embedded resources, which the result then names by reference; nil
	// keeps only their description, never their data.
	Attachments AttachmentStore
	// MaxResultBytes caps a result's text and each of its attachments'
	// data: a larger one fails the call with ErrResultTooLarge. Default
	// DefaultMaxResultBytes.
	MaxResultBytes int
}

// Client calls skills on an MCP server: a Skill Service or, in plain mode,
// any MCP server. It keeps one initialized MCP session per resolved URL
// (per URL and API key on SSE, one process on stdio), created lazily and
// reused by all calls. A Client is safe for concurrent use.
type Client struct {
	cfg        Config
	httpClient *http.Client

	mu       sync.Mutex
	closed   bool
	sessions map[string]*session

	manifests sync.Map // tenant, key id and name → cachedManifest
}

// cachedManifest is a loaded manifest and when it goes stale.
type cachedManifest struct {
	m       Manifest
	expires time.Time
}

// session is the lazily (re)connected MCP connection of one session key.
type session struct {
	mu   sync.Mutex
	conn *conn // nil until connected, and after a transport failure
}

// conn is one initialized MCP connection and its tools/list cache.
type conn struct {
	mc   *mcpclient.Client
	lost chan struct{} // closed when the transport reports the connection lost
	once sync.Once

	mu        sync.Mutex
	tools     map[string]toolList       // by keyID of the listing's API key
	inflight  int                       // calls in flight
	elicitors map[*Elicitor]int         // of the calls in flight that have one
	progress  map[string]func(Progress) // progress reports by token, of the calls in flight that asked
}

// toolList is a cached tools/list answer.
type toolList struct {
	tools []mcp.Tool
	at    time.Time
}

// markLost records that the connection is gone; the next call reconnects.
func (cn *conn) markLost(error) {
	cn.once.Do(func() { close(cn.lost) })
}

func (cn *conn) isLost() bool {
	select {
	case <-cn.lost:
		return true
	default:
		return false
	}
}

// NewClient validates cfg, applies defaults and returns a Client. No
// connection is made (and no process started) until the first call.
func NewClient(cfg Config) (*Client, error) {
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("%w: negative timeout", ErrInvalidConfig)
	}
	if cfg.ToolsTTL == 0 {
		cfg.ToolsTTL = DefaultToolsTTL
	}
	if cfg.ToolsTTL < 0 {
		return nil, fmt.Errorf("%w: negative tools TTL", ErrInvalidConfig)
	}
	if cfg.MaxResultBytes == 0 {
		cfg.MaxResultBytes = DefaultMaxResultBytes
	}
	if cfg.MaxResultBytes < 0 {
		return nil, fmt.Errorf("%w: negative result cap", ErrInvalidConfig)
	}
	if cfg.Mode == "" {
		cfg.Mode = ModeAuto
	}
	switch cfg.Mode {
	case ModeAuto, ModeSkillService, ModePlain:
	default:
		return nil, fmt.Errorf("%w: unknown mode %q (want %s, %s or %s)", ErrInvalidConfig, cfg.Mode, ModeAuto, ModeSkillService, ModePlain)
	}
	if cfg.Transport == "" {
		cfg.Transport = TransportStreamableHTTP
	}
	switch cfg.Transport {
	case TransportStreamableHTTP, TransportSSE:
		if len(cfg.Command) > 0 || len(cfg.Env) > 0 {
			return nil, fmt.Errorf("%w: Command and Env are for the stdio transport", ErrInvalidConfig)
		}
		u, err := url.Parse(strings.ReplaceAll(cfg.URL, TenantPlaceholder, "tenant"))
		if err != nil {
			return nil, fmt.Errorf("%w: URL does not parse", ErrInvalidConfig)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%w: URL must be an absolute http(s) URL", ErrInvalidConfig)
		}
	case TransportStdio:
		if cfg.URL != "" {
			return nil, fmt.Errorf("%w: the stdio transport takes a Command, not a URL", ErrInvalidConfig)
		}
		if len(cfg.Command) == 0 || cfg.Command[0] == "" {
			return nil, fmt.Errorf("%w: the stdio transport needs a Command", ErrInvalidConfig)
		}
		for _, kv := range cfg.Env {
			if name, _, ok := strings.Cut(kv, "="); !ok || name == "" {
				return nil, fmt.Errorf("%w: Env entries must be NAME=value", ErrInvalidConfig)
			}
		}
	default:
		return nil, fmt.Errorf("%w: unknown transport %q (want %s, %s or %s)", ErrInvalidConfig, cfg.Transport,
			TransportStreamableHTTP, TransportSSE, TransportStdio)
	}
	cfg.Command = append([]string(nil), cfg.Command...)
	cfg.Env = append([]string(nil), cfg.Env...)
	var base http.RoundTripper = http.DefaultTransport
	if cfg.OAuth != nil || len(cfg.OAuthByTenant) > 0 {
		if cfg.Transport == TransportStdio {
			return nil, fmt.Errorf("%w: OAuth is for the HTTP transports", ErrInvalidConfig)
		}
		all := []*ClientCredentials{cfg.OAuth}
		for _, c := range cfg.OAuthByTenant {
			all = append(all, c)
		}
		for _, o := range all {
			switch {
			case o == nil:
			case o.ClientSecret != "" && len(o.PrivateKeyPEM) > 0:
				return nil, fmt.Errorf("%w: OAuth takes a client secret or a private key, not both", ErrInvalidConfig)
			case cfg.OAuthAuthorizer == nil && (o.ClientID == "" || !o.confidential()):
				return nil, fmt.Errorf("%w: OAuth needs a client id and either a client secret or a private key", ErrInvalidConfig)
			}
		}
		if cfg.OAuthAuthorizer != nil && cfg.OAuthRedirectURI == "" {
			return nil, fmt.Errorf("%w: an OAuth authorizer needs a redirect URI", ErrInvalidConfig)
		}
		base = newOAuthTransport(base, cfg.Egress.Transport(nil), credentialsFor(cfg.OAuth, cfg.OAuthByTenant), cfg.OAuthAuthorizer, cfg.OAuthRedirectURI)
	}
	return &Client{
		cfg:        cfg,
		httpClient: &http.Client{Transport: refusalTransport{base: base}, CheckRedirect: refuseRedirect},
		sessions:   make(map[string]*session),
	}, nil
}

// Find returns the skills most relevant to query, best first: the tenant's
// Skill Service ranks them (find_relevant_skills), or, in plain mode, the
// client ranks the server's tools. A limit <= 0 lets the service choose
// (DefaultFindLimit in plain mode).
func (c *Client) Find(ctx context.Context, tenant, query string, limit int) ([]Summary, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	out, err := c.find(ctx, tenant, query, limit)
	if err != nil {
		return nil, c.redact(ctx, fmt.Errorf("skills: find for tenant %q: %w", tenant, err))
	}
	return out, nil
}

func (c *Client) find(ctx context.Context, tenant, query string, limit int) ([]Summary, error) {
	mode, tools, err := c.mode(ctx, tenant)
	if err != nil {
		return nil, err
	}
	if mode == ModePlain {
		return rankTools(query, tools, limit), nil
	}
	args := map[string]any{"query": query}
	if limit > 0 {
		args["limit"] = limit
	}
	res, err := c.callTool(ctx, tenant, ToolFindRelevantSkills, args, "")
	if err != nil {
		return nil, err
	}
	text, err := c.serviceResult(ctx, tenant, res)
	if err != nil {
		return nil, err
	}
	var out struct {
		Skills []Summary `json:"skills"`
	}
	if err := json.Unmarshal(text, &out); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidResponse, err)
	}
	return out.Skills, nil
}

// Load returns the Manifest of skill name from the tenant's catalog
// (load_skill, or in plain mode one built from the tool's definition). A
// skill outside the catalog yields an error wrapping ErrSkillNotFound.
//
// Manifests are reused for ToolsTTL per tenant and API key, since an
// executor loads its step's skills on every turn.
func (c *Client) Load(ctx context.Context, tenant, name string) (Manifest, error) {
	ck := tenant + "\x00" + keyID(c.apiKey(ctx)) + "\x00" + name
	if v, ok := c.manifests.Load(ck); ok && time.Now().Before(v.(cachedManifest).expires) {
		return v.(cachedManifest).m, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	m, err := c.load(ctx, tenant, name)
	if err != nil {
		return Manifest{}, c.redact(ctx, fmt.Errorf("skills: load %q for tenant %q: %w", name, tenant, err))
	}
	c.manifests.Store(ck, cachedManifest{m: m, expires: time.Now().Add(c.cfg.ToolsTTL)})
	return m, nil
}

func (c *Client) load(ctx context.Context, tenant, name string) (Manifest, error) {
	mode, tools, err := c.mode(ctx, tenant)
	if err != nil {
		return Manifest{}, err
	}
	if mode == ModePlain {
		tool, err := c.tool(ctx, tenant, tools, name)
		if err != nil {
			return Manifest{}, err
		}
		return toolManifest(tool)
	}
	res, err := c.callTool(ctx, tenant, ToolLoadSkill, map[string]any{"name": name}, "")
	if err != nil {
		return Manifest{}, err
	}
	text, err := c.serviceResult(ctx, tenant, res)
	if err != nil {
		return Manifest{}, err
	}
	var m Manifest
	if err := json.Unmarshal(text, &m); err != nil {
		return Manifest{}, fmt.Errorf("%w: %v", ErrInvalidResponse, err)
	}
	if m.Name == "" {
		return Manifest{}, fmt.Errorf("%w: manifest has no name", ErrInvalidResponse)
	}
	return m, nil
}

// Call invokes skill name for tenant with args (a JSON object; empty means
// {}) and returns its result: for a Skill Service, the text content of the
// result (or, when it has none, {"attachments": [...]}); in plain mode, a
// JSON object matching the Manifest's OutputSchema (the structured content
// of a tool that declares an output schema, else {"text": ...,
// "attachments": [...]}). Attachments describe the result's images, audio
// and resources, whose data is stored by reference (Config.Attachments),
// never returned. A result over Config.MaxResultBytes yields an error
// wrapping ErrResultTooLarge. A server that asks the user something
// during the call gets the answers of the context's Elicitor
// (WithElicitor); a question it has no answer for fails the call with an
// ElicitationError. idempotencyKey, when not empty, is sent in
// the request's _meta as "idempotency_key"; services use it to
// deduplicate, since a call that fails with a transport error is retried
// once on a fresh session. A tool error yields an error wrapping
// ErrSkillFailed with the tool's message; a skill unknown to the tenant
// yields an error wrapping ErrSkillNotFound; a refusal of the caller (an
// HTTP 401 or 403 answer, or a tool error starting with "permission
// denied" or "forbidden") yields an error wrapping ErrPermissionDenied and
// not ErrSkillFailed, and is not retried.
func (c *Client) Call(ctx context.Context, tenant, name string, args json.RawMessage, idempotencyKey string) ([]byte, error) {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 {
		trimmed = []byte("{}")
	}
	if !json.Valid(trimmed) || trimmed[0] != '{' {
		return nil, fmt.Errorf("skills: call %q for tenant %q: %w: must be a JSON object", name, tenant, ErrInvalidArguments)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	out, err := c.call(ctx, tenant, name, json.RawMessage(trimmed), idempotencyKey)
	if e := elicitorFrom(ctx); e != nil {
		if q, asked := e.Asked(); asked {
			// Whatever the cancelled question made of the call, it waits
			// for the user's answer.
			out, err = nil, &ElicitationError{Elicitation: q}
		}
	}
	if err != nil {
		return nil, c.redact(ctx, fmt.Errorf("skills: call %q for tenant %q: %w", name, tenant, err))
	}
	return out, nil
}

func (c *Client) call(ctx context.Context, tenant, name string, args json.RawMessage, idempotencyKey string) ([]byte, error) {
	mode, tools, err := c.mode(ctx, tenant)
	if err != nil {
		return nil, err
	}
	if mode == ModePlain {
		tool, err := c.tool(ctx, tenant, tools, name)
		if err != nil {
			return nil, err
		}
		res, err := c.callTool(ctx, tenant, name, args, idempotencyKey)
		if err != nil {
			return nil, err
		}
		return c.plainResult(ctx, tenant, tool, res)
	}
	res, err := c.callTool(ctx, tenant, name, args, idempotencyKey)
	if err != nil {
		return nil, err
	}
	return c.serviceResult(ctx, tenant, res)
}

// Close closes every session (stopping a stdio server). Calls made after
// Close fail with ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	sessions := c.sessions
	c.sessions = make(map[string]*session)
	c.mu.Unlock()

	var errs []error
	for _, s := range sessions {
		s.mu.Lock()
		if s.conn != nil {
			if err := s.conn.mc.Close(); err != nil {
				errs = append(errs, err)
			}
			s.conn = nil
		}
		s.mu.Unlock()
	}
	return c.redact(context.Background(), errors.Join(errs...))
}

func (c *Client) redact(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, key := range []string{c.apiKey(ctx), c.cfg.APIKey} {
		if key != "" {
			msg = strings.ReplaceAll(msg, key, "[REDACTED]")
		}
	}
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

// redactedError is an error whose message has had a secret removed.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }

func (e *redactedError) Unwrap() error { return e.err }
