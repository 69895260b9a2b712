package skills

import (
	"context"
	"log/slog"
	"os"
	"os/exec"

	"github.com/mark3labs/mcp-go/client/transport"
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
		return transport.NewSSE(t.endpoint,
			transport.WithHTTPClient(c.httpClient),
			transport.WithSSELogger(quiet),
			transport.WithHeaderFunc(c.headers),
			transport.WithEndpointTimeout(c.cfg.Timeout),
			transport.WithResponseTimeout(c.cfg.Timeout),
		)
	case TransportStdio:
		return transport.NewStdioWithOptions(c.cfg.Command[0], c.cfg.Env, c.cfg.Command[1:],
			transport.WithCommandFunc(stdioCommand),
			transport.WithCommandLogger(quiet),
		), nil
	default:
		return transport.NewStreamableHTTP(t.endpoint,
			transport.WithHTTPBasicClient(c.httpClient),
			transport.WithHTTPLogger(quiet),
			transport.WithHTTPHeaderFunc(c.headers),
		)
	}
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
