package demo

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"strings"

	"github.com/google/uuid"
	"github.com/mark3labs/mcp-go/server"

	"github.com/agentbus/agentbus/skills"
)

// mountSSE serves mcpServer over the HTTP+SSE transport at
// /tenants/{tenant}/sse, with the message endpoint the stream announces at
// /tenants/{tenant}/message. A session id starts with its tenant, and a
// message is accepted only on its session's tenant path, so a session
// opened for one tenant cannot be driven through another's.
func mountSSE(mux *http.ServeMux, mcpServer *server.MCPServer) {
	sse := server.NewSSEServer(mcpServer,
		server.WithDynamicBasePath(func(r *http.Request, _ string) string {
			return "/tenants/" + r.PathValue("tenant")
		}),
		server.WithSSEEndpoint("/sse"),
		server.WithMessageEndpoint("/message"),
		server.WithUseFullURLForMessageEndpoint(false),
		server.WithSessionIDGenerator(func(_ context.Context, r *http.Request) (string, error) {
			return r.PathValue("tenant") + "." + uuid.NewString(), nil
		}),
	)
	mux.Handle("GET /tenants/{tenant}/sse", tenantScope(sse.SSEHandler()))
	mux.Handle("POST /tenants/{tenant}/message", tenantScope(sessionOfTenant(sse.MessageHandler())))
}

// sessionOfTenant rejects a message whose SSE session belongs to another
// tenant than the path's.
func sessionOfTenant(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Query().Get("sessionId"), r.PathValue("tenant")+".") {
			http.Error(w, "unknown session", http.StatusNotFound)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ServeStdio serves the catalog of tenant over MCP on in and out (the
// stdio transport: one JSON-RPC message per line) until in ends or ctx is
// cancelled. A stdio stream has no URL, so it is scoped to the one tenant
// given here. The MCP library keeps one stdio session per process, so at
// most one ServeStdio may run at a time in a process.
func (s *Service) ServeStdio(ctx context.Context, tenant string, in io.Reader, out io.Writer) error {
	if !skills.ValidTenant(tenant) {
		return fmt.Errorf("demo: serve stdio: %w", skills.ErrInvalidTenant)
	}
	stdio := server.NewStdioServer(s.mcpSrv)
	stdio.SetErrorLogger(log.New(io.Discard, "", 0))
	return stdio.Listen(context.WithValue(ctx, tenantKey{}, tenant), in, out)
}
