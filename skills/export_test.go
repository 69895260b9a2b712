package skills

import (
	"context"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// DetectMode is, for the external tests, the mode c picks for tenant and
// the tools/list it is based on.
func DetectMode(ctx context.Context, c *Client, tenant string) (string, []mcp.Tool, error) {
	return c.mode(ctx, tenant)
}

// StopStdioServer closes, for the external tests, c's stdio session
// behind its back, as if the server process had exited.
func StopStdioServer(c *Client) {
	c.mu.Lock()
	cn := c.sessions[TransportStdio].conn
	c.mu.Unlock()
	_ = cn.mc.Close()
}

// SetOAuthClock sets the clock of c's OAuth tokens.
func SetOAuthClock(c *Client, now func() time.Time) {
	c.httpClient.Transport.(refusalTransport).base.(*oauthTransport).now = now
}
