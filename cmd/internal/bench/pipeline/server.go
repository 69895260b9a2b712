package pipeline

import (
	"context"
	stdjson "encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/agentbus/agentbus/skills"
)

// Server serves the five pipeline skills as a Skill Service (MCP
// over streamable HTTP, find_relevant_skills and load_skill beside the
// skills) on a loopback port, so role processes reach them over the
// network as they would a real Skill Service.
type Server struct {
	srv *http.Server
	// URL is the MCP endpoint.
	URL string
}

// StartServer serves NewSkills(latency) on 127.0.0.1.
func StartServer(latency time.Duration) (*Server, error) {
	p := NewSkills(latency)
	m := server.NewMCPServer("agentbus-bench-pipeline", "1.0.0", server.WithToolCapabilities(false), server.WithRecovery())
	m.AddTool(mcp.Tool{Name: skills.ToolFindRelevantSkills, Description: "Find the skills most relevant to a query, best first",
		RawInputSchema: stdjson.RawMessage(`{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer"}},"required":["query"]}`)},
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			found, _ := p.Find(ctx, "", req.GetString("query", ""), req.GetInt("limit", skills.DefaultFindLimit))
			return textResult(map[string][]skills.Summary{"skills": found})
		})
	m.AddTool(mcp.Tool{Name: skills.ToolLoadSkill, Description: "Load a skill's manifest",
		RawInputSchema: stdjson.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)},
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			man, err := p.Load(ctx, "", req.GetString("name", ""))
			if err != nil {
				return mcp.NewToolResultError(skills.NotFoundMessage + ": " + req.GetString("name", "")), nil
			}
			return textResult(man)
		})
	for _, name := range p.names {
		man := p.manifests[name]
		m.AddTool(mcp.Tool{Name: name, Description: man.Description, RawInputSchema: stdjson.RawMessage(man.InputSchema)},
			func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				args, err := json.Marshal(req.GetArguments())
				if err != nil {
					return mcp.NewToolResultError(err.Error()), nil
				}
				out, err := p.Call(ctx, "", name, args, "")
				if err != nil {
					return mcp.NewToolResultError(err.Error()), nil
				}
				return mcp.NewToolResultText(string(out)), nil
			})
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", server.NewStreamableHTTPServer(m, server.WithStateLess(true),
		server.WithStreamableHTTPLogger(slog.New(slog.DiscardHandler))))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, URL: "http://" + ln.Addr().String() + "/mcp"}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			ln.Close()
		}
	}()
	return s, nil
}

// Close stops serving.
func (s *Server) Close() { _ = s.srv.Close() }

// textResult encodes v as a tool result's single text content.
func textResult(v any) (*mcp.CallToolResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return mcp.NewToolResultText(string(b)), nil
}
