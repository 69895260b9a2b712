package skills

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// stdioBaseEnv names the variables a stdio server inherits from this
// process; Config.Env adds to them.
var stdioBaseEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR", "LANG"}

// newTransport builds the configured transport for t. The HTTP transports
// set X-Api-Key per request from the request's context (WithAPIKey, else
// Config.APIKey).
func (c *Client) newTransport(t target) (transport.Interface, error) {
	quiet := slog.New(slog.DiscardHandler)
	switch c.cfg.Transport {
	case TransportSSE:
		sse, err := transport.NewSSE(t.endpoint,
			transport.WithHTTPClient(c.httpClient),
			transport.WithSSELogger(quiet),
			transport.WithHeaderFunc(c.headers),
			transport.WithEndpointTimeout(c.cfg.Timeout),
			transport.WithResponseTimeout(c.cfg.Timeout),
		)
		if err != nil {
			return nil, err
		}
		return cancellingSSE{sse}, nil
	case TransportStdio:
		return transport.NewStdioWithOptions(c.cfg.Command[0], c.cfg.Env, c.cfg.Command[1:],
			transport.WithCommandFunc(stdioCommand),
			transport.WithCommandLogger(quiet),
		), nil
	default:
		h, err := transport.NewStreamableHTTP(t.endpoint,
			transport.WithHTTPBasicClient(c.httpClient),
			transport.WithHTTPLogger(quiet),
			transport.WithHTTPHeaderFunc(c.headers),
			// The session's standalone GET stream: a server may send its
			// requests there (an elicitation from a tool that does not tie
			// it to the call's stream). A server without one answers 405
			// and the client stops asking.
			//lint:ignore SA1019 the sessions speak a protocol version before 2026-07-28, on which this stream is how a server sends requests outside a call; Client.Listen replaces it only on 2026-07-28.
			transport.WithContinuousListening(),
		)
		if err != nil {
			return nil, err
		}
		return cancellingHTTP{h}, nil
	}
}

// The HTTP transports tell the server when the caller abandons a call: a
// tools/call whose context ends (a cancelled run, a step's timeout) before
// its answer is followed by notifications/cancelled naming its request,
// so the server stops the work. (mcp-go sends it itself only over stdio;
// stdio keeps that.) Embedding the transports keeps every interface they
// implement.
type cancellingHTTP struct{ *transport.StreamableHTTP }

type cancellingSSE struct{ *transport.SSE }

func (t cancellingHTTP) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	resp, err := t.StreamableHTTP.SendRequest(ctx, req)
	notifyCancelled(ctx, err, req, t.StreamableHTTP)
	return resp, err
}

func (t cancellingSSE) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	resp, err := t.SSE.SendRequest(ctx, req)
	notifyCancelled(ctx, err, req, t.SSE)
	return resp, err
}

// cancelNotifyTimeout bounds the sending of notifications/cancelled.
const cancelNotifyTimeout = 5 * time.Second

// notifyCancelled sends notifications/cancelled for req when its call
// failed because ctx ended, off the caller's path (best effort).
func notifyCancelled(ctx context.Context, err error, req transport.JSONRPCRequest, to transport.Interface) {
	if err == nil || ctx.Err() == nil || req.Method != string(mcp.MethodToolsCall) {
		return
	}
	n := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{
		Method: string(mcp.MethodNotificationCancelled),
		Params: mcp.NotificationParams{AdditionalFields: map[string]any{"requestId": req.ID, "reason": ctx.Err().Error()}},
	}}
	nctx := context.WithoutCancel(ctx)
	go func() {
		nctx, cancel := context.WithTimeout(nctx, cancelNotifyTimeout)
		defer cancel()
		_ = to.SendNotification(nctx, n)
	}()
}

// stdioCommand builds the stdio server's process with a minimal inherited
// environment plus env. ctx lives as long as the session.
func stdioCommand(ctx context.Context, command string, env []string, args []string) (*exec.Cmd, error) {
	cmd := exec.CommandContext(ctx, command, args...)
	cmd.Env = make([]string, 0, len(stdioBaseEnv)+len(env))
	for _, name := range stdioBaseEnv {
		if v, ok := os.LookupEnv(name); ok {
			cmd.Env = append(cmd.Env, name+"="+v)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	return cmd, nil
}

// refuseRedirect is the redirect policy of the HTTP transports: none is
// followed. A request carries the caller's API key (X-Api-Key, which
// net/http copies to a redirect's target whatever its host) or an OAuth
// token, and those go to the configured Skill Service only. mcp-go's
// streamable HTTP transport would follow any redirect otherwise
// (GO-2026-6911, for which mcp-go has no fixed version).
func refuseRedirect(req *http.Request, _ []*http.Request) error {
	return fmt.Errorf("%w to %s://%s", ErrRedirect, req.URL.Scheme, req.URL.Host)
}

// refusalTransport is the HTTP transport under a Client's streamable HTTP
// and SSE transports: it fails a request that the server answers with HTTP
// 401 or 403 with an error wrapping ErrPermissionDenied, which mcp-go
// passes up wrapped with %w.
//
// The status is checked here, on the response, because mcp-go does not
// surface it reliably: it turns a 401 into an AuthorizationRequiredError,
// any 4xx answer to initialize into ErrLegacySSEServer, other statuses into
// a formatted string ("request failed with status 403: <body>", or on the
// SSE stream "unexpected status code: 403"), and Client.Initialize drops
// the error of its server/discover probe altogether. So no error string is
// matched. The refusal's body, which may echo anything (the caller's API
// key included), is discarded.
type refusalTransport struct {
	base http.RoundTripper
}

// RoundTrip sends req with the base transport and turns a 401 or 403
// response into an ErrPermissionDenied error.
func (t refusalTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	streamAnswered(req)
	if err != nil || (resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden) {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // so the connection can be reused
	_ = resp.Body.Close()
	return nil, fmt.Errorf("%w: HTTP %d", ErrPermissionDenied, resp.StatusCode)
}
