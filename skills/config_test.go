package skills

import (
	"errors"
	"testing"
	"time"
)

func TestNewClientValidatesConfig(t *testing.T) {
	bad := []Config{
		{},
		{URL: "127.0.0.1:7070/tenants/{tenant}/mcp"},
		{URL: "ftp://host/tenants/{tenant}/mcp"},
		{URL: "http://host/tenants/{tenant}/mcp", Timeout: -time.Second},
		{URL: "http://host/tenants/{tenant}/mcp", ToolsTTL: -time.Second},
		{URL: "http://host/tenants/{tenant}/mcp", MaxResultBytes: -1},
		{URL: "http://host/mcp", Transport: "websocket"},
		{URL: "http://host/mcp", Mode: "magic"},
		{URL: "http://host/mcp", Command: []string{"node"}},
		{Transport: TransportSSE},
		{Transport: TransportSSE, URL: "/tenants/{tenant}/sse"},
		{Transport: TransportStdio},
		{Transport: TransportStdio, Command: []string{""}},
		{Transport: TransportStdio, Command: []string{"node"}, URL: "http://host/mcp"},
		{Transport: TransportStdio, Command: []string{"node"}, Env: []string{"NOEQUALS"}},
	}
	for _, cfg := range bad {
		if _, err := NewClient(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("NewClient(%+v) err = %v, want ErrInvalidConfig", cfg, err)
		}
	}
	c, err := NewClient(Config{URL: "https://skills.example/tenants/{tenant}/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	if c.cfg.Timeout != DefaultTimeout || c.cfg.ToolsTTL != DefaultToolsTTL || c.cfg.MaxResultBytes != DefaultMaxResultBytes ||
		c.cfg.Transport != TransportStreamableHTTP || c.cfg.Mode != ModeAuto {
		t.Fatalf("defaults = %+v", c.cfg)
	}
	good := []Config{
		{URL: "http://127.0.0.1:7070/mcp"}, // {tenant} is optional: one scope for every tenant
		{URL: "http://127.0.0.1:7070/tenants/{tenant}/sse", Transport: TransportSSE, Mode: ModeSkillService},
		{Transport: TransportStdio, Command: []string{"node", "server.js"}, Env: []string{"A=b"}, Mode: ModePlain},
	}
	for _, cfg := range good {
		if _, err := NewClient(cfg); err != nil {
			t.Fatalf("NewClient(%+v): %v", cfg, err)
		}
	}
}
