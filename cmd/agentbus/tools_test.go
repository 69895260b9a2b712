package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/skills/demo"
	"github.com/agentbus/agentbus/store"
)

// TestToolsInTheAllInOne: the all-in-one generates its secrets key, so a
// tenant creates a webhook tool through the API; the tool is listed with
// the system tools and its secret is in no stored document.
func TestToolsInTheAllInOne(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := app.StartStack(ctx, held(t, app.StackConfig{DataDir: dir, NATSPort: -1, HTTPAddr: "127.0.0.1:0",
		Log: zerolog.Nop(), Process: app.Config{AckWait: 2 * time.Second}, Skills: demo.NewService(demo.Config{}).Handler()}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if st, err := os.Stat(filepath.Join(dir, "secrets.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("secrets key: %v, %v", st, err)
	}
	base := "http://" + s.IngressAddr
	const secret = "whsec-all-in-one-0123456789"
	created := post(t, base+"/agent/tools", "demo", `{"name":"lookup_order","description":"Look up an order.",`+
		`"parameters":{"type":"object","properties":{"order_id":{"type":"string"}}},`+
		`"handler":{"type":"webhook","url":"https://hooks.example.com/orders","idempotent":true},"secret":"`+secret+`"}`, http.StatusCreated)
	id, _ := created["tool_id"].(string)
	if !strings.HasPrefix(id, "tool-") || created["secret"] != nil {
		t.Fatalf("created %v", created)
	}
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, base+"/agent/tools", nil)
	req.Header.Set("X-Tenant-Id", "demo")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Tools []agents.Tool `json:"tools"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Tools) != len(agents.SystemTools)+1 {
		t.Fatalf("listed %+v, %v", list, err)
	}
	d, err := s.Deps.Store.GetDefinition(context.Background(), "demo", store.KindTool, id)
	if err != nil || strings.Contains(string(d.Spec), secret) {
		t.Fatalf("stored %s, %v", d.Spec, err)
	}
}
