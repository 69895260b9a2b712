package tools_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/skills/demo"
	"github.com/agentbus/agentbus/store"
	"github.com/agentbus/agentbus/tools"
)

// TestLayer: the layer serves the system tools and the tenant's active
// webhook tools next to the real demo Skill Service's skills: Find ranks
// them together, Load gives their manifests (with their approval modes),
// Call runs them or delegates; an inactive or another tenant's tool is
// not served; an edit is seen once the cache expires.
func TestLayer(t *testing.T) {
	e, rc := newEnv(t), newReceiver(t)
	svc := httptest.NewServer(demo.NewService(demo.Config{}).Handler())
	t.Cleanup(svc.Close)
	sk, err := skills.NewClient(skills.Config{URL: svc.URL + "/tenants/{tenant}/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sk.Close() })
	sessions, _ := e.js.KeyValue(testCtx(t), handlers.BucketSessions)
	clock := time.Now()
	layer := &tools.Layer{Next: sk, Defs: e.st, Now: func() time.Time { return clock },
		System:   &tools.System{JS: e.js, Memory: e.st, Sessions: &runctl.Sessions{KV: sessions}},
		Webhooks: &tools.Webhooks{Secrets: e.secrets, Egress: local, RootCAs: rc.srv.Roots()}}
	tool := hookTool(t, e, rc, "tool-orders", "/orders", agents.ToolHandler{Idempotent: true})
	tool.Name, tool.Description = "lookup_order", "Look up the shipping status of a customer order by its id."
	now := time.Now().UTC()
	tool.Version, tool.CreatedAt, tool.UpdatedAt = 1, now, now
	d, _ := tool.Definition()
	if err := e.st.PutDefinition(testCtx(t), d, 0); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)

	found, err := layer.Find(ctx, "acme", "what is the shipping status of my order", 5)
	if err != nil || len(found) == 0 || found[0].Name != "lookup_order" {
		t.Fatalf("found %v, %v", found, err)
	}
	found, err = layer.Find(ctx, "acme", "rank the active outlets by engagement", 5)
	if err != nil || !slices.ContainsFunc(found, func(s skills.Summary) bool { return s.Name == demo.SkillEngagementAnalytics }) {
		t.Fatalf("the Skill Service's skills are not found: %v, %v", found, err)
	}
	if found, _ := layer.Find(ctx, "acme", "remember the customer's plan in the session context", 5); !slices.ContainsFunc(found,
		func(s skills.Summary) bool { return s.Name == agents.ToolSetContext }) {
		t.Fatalf("set_context is not found: %v", found)
	}

	for name, mode := range map[string]string{"lookup_order": skills.ModeNetwork, agents.ToolSendMessage: skills.ModeNetwork,
		agents.ToolGetContext: skills.ModeReadOnly, agents.ToolSetContext: skills.ModeLocalWrite, agents.ToolEndConversation: skills.ModeLocalWrite} {
		m, err := layer.Load(ctx, "acme", name)
		if err != nil || m.Name != name || m.ApprovalMode() != mode || len(m.InputSchema) == 0 {
			t.Fatalf("manifest of %s: %+v (mode %s), %v", name, m, m.ApprovalMode(), err)
		}
	}
	if m, err := layer.Load(ctx, "acme", demo.SkillEngagementAnalytics); err != nil || m.Name != demo.SkillEngagementAnalytics {
		t.Fatalf("delegated load: %+v, %v", m, err)
	}
	// The handoff tools are listed, not run here; another tenant has no
	// lookup_order.
	for _, c := range [][2]string{{"acme", agents.ToolHandoffToHuman}, {"globex", "lookup_order"}} {
		if _, err := layer.Load(ctx, c[0], c[1]); !errors.Is(err, skills.ErrSkillNotFound) {
			t.Fatalf("%s loads %s: %v", c[0], c[1], err)
		}
	}

	out, err := layer.Call(skills.WithCallInfo(ctx, skills.CallInfo{RunID: "run-1", SessionID: "sess-1"}), "acme", "lookup_order",
		json.RawMessage(`{"order_id":"42"}`), "run-1/1/t/0")
	if err != nil || !strings.Contains(string(out), `"shipped"`) {
		t.Fatalf("webhook call: %s, %v", out, err)
	}
	if out, err := layer.Call(ctx, "acme", demo.SkillEngagementAnalytics, json.RawMessage(`{"outlet_ids":["out-001"]}`), "k2"); err != nil ||
		!strings.Contains(string(out), "out-001") {
		t.Fatalf("delegated call: %s, %v", out, err)
	}

	// Deactivated: served until the cache expires, then not.
	tool.Status, tool.Version = agents.StatusInactive, 2
	d, _ = tool.Definition()
	if err := e.st.PutDefinition(ctx, d, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := layer.Load(ctx, "acme", "lookup_order"); err != nil {
		t.Fatalf("cached tool: %v", err)
	}
	clock = clock.Add(tools.DefaultCacheTTL)
	if _, err := layer.Load(ctx, "acme", "lookup_order"); !errors.Is(err, skills.ErrSkillNotFound) {
		t.Fatalf("inactive tool loads: %v", err)
	}
	if found, _ := layer.Find(ctx, "acme", "shipping status of my order", 5); slices.ContainsFunc(found,
		func(s skills.Summary) bool { return s.Name == "lookup_order" }) {
		t.Fatalf("inactive tool found: %v", found)
	}
}

// unreadableDefs is a definitions store that cannot be read.
type unreadableDefs struct{}

func (unreadableDefs) ListDefinitions(context.Context, string, string) ([]store.Definition, error) {
	return nil, context.DeadlineExceeded
}

// TestLayer_AnUnreadableRegistryCallsNoSkill: when the tenant's tool
// definitions cannot be read, a call fails as one that never reached a
// skill (skills.ErrNotCalled, not a skill failure), and is not handed on.
func TestLayer_AnUnreadableRegistryCallsNoSkill(t *testing.T) {
	svc := demo.NewService(demo.Config{})
	hs := httptest.NewServer(svc.Handler())
	t.Cleanup(hs.Close)
	sk, err := skills.NewClient(skills.Config{URL: hs.URL + "/tenants/{tenant}/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sk.Close() })
	layer := &tools.Layer{Next: sk, Defs: unreadableDefs{}, Webhooks: &tools.Webhooks{}}
	_, err = layer.Call(testCtx(t), "acme", demo.SkillOutletList, json.RawMessage(`{}`), "k1")
	if !errors.Is(err, skills.ErrNotCalled) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, skills.ErrSkillFailed) {
		t.Fatalf("call with the registry unreadable: %v, want ErrNotCalled", err)
	}
	if n := svc.Calls(demo.SkillOutletList); n != 0 {
		t.Fatalf("the skill ran %d times", n)
	}
}
