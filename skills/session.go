package skills

import (
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

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/agentbus/agentbus/tracing"
)

// target is where the calls of one tenant go: the resolved endpoint (empty
// for stdio) and the key of the session that serves them.
type target struct {
	endpoint string
	session  string
	tenant   string
}

// resolve validates tenant and returns its target. Streamable HTTP shares
// one session per endpoint among API keys, since every request carries its
// own key; SSE binds a session to the event stream its first request
// opened, so each API key gets its own; stdio has one session.
func (c *Client) resolve(ctx context.Context, tenant string) (target, error) {
	if !ValidTenant(tenant) {
		return target{}, ErrInvalidTenant
	}
	switch c.cfg.Transport {
	case TransportStdio:
		return target{session: TransportStdio, tenant: tenant}, nil
	case TransportSSE:
		endpoint := strings.ReplaceAll(c.cfg.URL, TenantPlaceholder, url.PathEscape(tenant))
		return target{endpoint: endpoint, session: endpoint + " " + keyID(c.apiKey(ctx)), tenant: tenant}, nil
	default:
		endpoint := strings.ReplaceAll(c.cfg.URL, TenantPlaceholder, url.PathEscape(tenant))
		return target{endpoint: endpoint, session: endpoint, tenant: tenant}, nil
	}
}

// withConn runs fn on the tenant's connection, with ctx naming the tenant
// (whose OAuth credentials its requests carry). A transport failure
// discards the connection and runs fn once more on a fresh one.
func (c *Client) withConn(ctx context.Context, tenant string, fn func(context.Context, *conn) error) error {
	t, err := c.resolve(ctx, tenant)
	if err != nil {
		return err
	}
	ctx = withTenant(ctx, tenant) // the HTTP requests' OAuth credentials are the tenant's
	for attempt := 0; ; attempt++ {
		cn, err := c.conn(ctx, t)
		if err != nil {
			return err
		}
		err = fn(ctx, cn)
		if err == nil {
			return nil
		}
		if errors.Is(err, ErrPermissionDenied) {
			// A refusal is an answer, not a broken session (which other
			// API keys may share): keep it and do not retry.
			return err
		}
		if ctx.Err() != nil {
			// The caller gave up (a cancelled run, a timeout): the
			// connection is fine, and other calls share it.
			return err
		}
		var terr *transport.Error
		if errors.As(err, &terr) {
			c.discard(t.session, cn)
			if attempt == 0 && ctx.Err() == nil {
				continue
			}
		}
		return err
	}
}

// callTool runs one tools/call and returns its result, mapping an unknown
// tool to ErrSkillNotFound, arguments the server rejects (JSON-RPC invalid
// params) to ErrInvalidArguments, a refusal (see refusal) to ErrPermissionDenied
// and any other tool error to ErrSkillFailed. An HTTP 401 or 403 answer
// already fails the request with ErrPermissionDenied (refusalTransport).
func (c *Client) callTool(ctx context.Context, tenant, name string, args any, idempotencyKey string) (*mcp.CallToolResult, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	meta := map[string]any{}
	if idempotencyKey != "" {
		meta[MetaIdempotencyKey] = idempotencyKey
	}
	if tp := tracing.TraceParent(ctx); tp != "" {
		meta[MetaTraceParent] = tp // the W3C trace context, so the server's spans join the run's trace
	}
	var result *mcp.CallToolResult
	err := c.withConn(ctx, tenant, func(ctx context.Context, cn *conn) error {
		defer cn.track(elicitorFrom(ctx))()
		token, unwatch := cn.watchProgress(progressFrom(ctx))
		defer unwatch()
		req := req
		if len(meta) > 0 || token != nil {
			req.Params.Meta = &mcp.Meta{ProgressToken: token, AdditionalFields: meta}
		}
		var err error
		result, err = cn.mc.CallTool(ctx, req)
		return err
	})
	if err != nil {
		if errors.Is(err, mcp.ErrInvalidParams) && strings.Contains(err.Error(), "not found") {
			return nil, fmt.Errorf("%w: %w", ErrSkillNotFound, err)
		}
		if errors.Is(err, mcp.ErrInvalidParams) {
			// The server rejected the arguments: the same call is
			// rejected the same way.
			return nil, fmt.Errorf("%w: %w", ErrInvalidArguments, err)
		}
		return nil, err
	}
	if result.IsError {
		msg := strings.TrimSpace(string(resultText(result)))
		if rest, ok := strings.CutPrefix(msg, NotFoundMessage); ok {
			return nil, fmt.Errorf("%w%s", ErrSkillNotFound, rest)
		}
		if rest, ok := refusal(msg); ok {
			return nil, fmt.Errorf("%w%s", ErrPermissionDenied, rest)
		}
		if msg == "" {
			msg = "tool returned an error without a message"
		}
		return nil, fmt.Errorf("%w: %s", ErrSkillFailed, msg)
	}
	return result, nil
}

// refusal reports whether a tool error message refuses the caller: it
// starts with PermissionDeniedMessage or "forbidden", in any case. rest is
// what follows "permission denied", or the whole message after ": " for
// "forbidden", to follow ErrPermissionDenied's own text.
func refusal(msg string) (rest string, ok bool) {
	if hasPrefixFold(msg, PermissionDeniedMessage) {
		return msg[len(PermissionDeniedMessage):], true
	}
	if hasPrefixFold(msg, "forbidden") {
		return ": " + msg, true
	}
	return "", false
}

// hasPrefixFold is strings.HasPrefix ignoring case.
func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// serviceResult is a Skill Service answer: the result's text content or,
// when it has none, {"attachments": [...]} describing its other items.
func (c *Client) serviceResult(ctx context.Context, tenant string, r *mcp.CallToolResult) ([]byte, error) {
	if text := resultText(r); text != nil {
		if err := c.checkSize("text", len(text)); err != nil {
			return nil, err
		}
		return text, nil
	}
	atts, err := c.attachments(ctx, tenant, r)
	if err != nil {
		return nil, err
	}
	if len(atts) == 0 {
		return nil, fmt.Errorf("%w: result has no content", ErrInvalidResponse)
	}
	return json.Marshal(map[string][]Attachment{AttachmentsOutputField: atts})
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

// conn returns the initialized connection of t, connecting if needed.
func (c *Client) conn(ctx context.Context, t target) (*conn, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	s := c.sessions[t.session]
	if s == nil {
		s = &session{}
		c.sessions[t.session] = s
	}
	c.mu.Unlock()

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil && !s.conn.isLost() {
		return s.conn, nil
	}
	if s.conn != nil {
		_ = s.conn.mc.Close()
		s.conn = nil
	}
	cn, err := c.connect(ctx, t)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		_ = cn.mc.Close()
		return nil, ErrClosed
	}
	s.conn = cn
	return cn, nil
}

// connect opens and initializes a new MCP connection for t.
func (c *Client) connect(ctx context.Context, t target) (*conn, error) {
	trans, err := c.newTransport(t)
	if err != nil {
		return nil, fmt.Errorf("skills: create transport: %w", err)
	}
	cn := &conn{lost: make(chan struct{}), tools: map[string]toolList{}}
	var opts []mcpclient.ClientOption
	if _, ok := trans.(transport.BidirectionalInterface); ok {
		// Elicitation is declared only where a server's request can reach
		// the client: not on the legacy SSE transport, whose client side
		// takes no requests (a server would wait for an answer that never
		// comes).
		opts = append(opts, mcpclient.WithElicitationHandler(elicitHandler{cn: cn}))
	}
	cn.mc = mcpclient.NewClient(trans, opts...)
	cn.mc.OnConnectionLost(cn.markLost)
	cn.mc.OnNotification(cn.onNotification)
	var listening *streamOpened
	if _, ok := trans.(cancellingHTTP); ok {
		listening = &streamOpened{ch: make(chan struct{})}
	}
	if err := c.start(withTenant(ctx, t.tenant), cn.mc, listening); err != nil {
		_ = cn.mc.Close()
		return nil, fmt.Errorf("skills: start session: %w", err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: clientName, Version: clientVersion}
	init.Params.ProtocolVersion = c.cfg.ProtocolVersion
	if _, err := cn.mc.Initialize(ctx, init); err != nil {
		_ = cn.mc.Close()
		return nil, fmt.Errorf("skills: initialize session: %w", err)
	}
	listening.wait(ctx)
	return cn, nil
}

// listenWait bounds how long a new session waits for the server to answer
// its standalone GET stream.
const listenWait = 2 * time.Second

// streamOpened is closed once the server has answered a session's
// standalone GET stream (opened it, refused it, or failed it). A session
// makes its first request only then: a server that took a GET arriving
// after a call for that call's reconnection (the stream a server may end
// with a retry field) would answer the call on it, where mcp-go reads no
// responses, and the call would hang until its timeout.
type streamOpened struct {
	once sync.Once
	ch   chan struct{}
}

type streamOpenedKey struct{}

// streamAnswered records that the GET stream of req's session has been
// answered, if req is that stream.
func streamAnswered(req *http.Request) {
	if l, _ := req.Context().Value(streamOpenedKey{}).(*streamOpened); l != nil && req.Method == http.MethodGet {
		l.once.Do(func() { close(l.ch) })
	}
}

// wait waits until the stream is answered, at most listenWait or until
// ctx ends; a nil l does not wait.
func (l *streamOpened) wait(ctx context.Context) {
	if l == nil {
		return
	}
	t := time.NewTimer(listenWait)
	defer t.Stop()
	select {
	case <-l.ch:
	case <-t.C:
	case <-ctx.Done():
	}
}

// start starts mc's transport. An SSE stream and a stdio process outlive
// the call that opens them, so the transport starts on a context that is
// not cancelled with the call (it carries only the call's API key, for the
// SSE stream's request); the call's context bounds the wait.
func (c *Client) start(ctx context.Context, mc *mcpclient.Client, listening *streamOpened) error {
	startCtx := withTenant(WithAPIKey(context.Background(), c.apiKey(ctx)), tenantFrom(ctx))
	if listening != nil {
		startCtx = context.WithValue(startCtx, streamOpenedKey{}, listening)
	}
	done := make(chan error, 1)
	go func() { done <- mc.Start(startCtx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		_ = mc.Close()
		<-done
		return ctx.Err()
	}
}

// discard drops cn as the connection of session key if it still is, so
// that the next call starts a new one.
func (c *Client) discard(key string, cn *conn) {
	c.mu.Lock()
	s := c.sessions[key]
	c.mu.Unlock()
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == cn {
		s.conn = nil
		_ = cn.mc.Close()
	}
}

// redact removes the API keys of ctx and of the config from err's message.
// The returned error still wraps err for errors.Is and errors.As.
