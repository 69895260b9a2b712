package skills

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbus/agentbus/text"
	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// methodCounter is a wrapping handler that counts JSON-RPC methods per path
// and can fail the next tools/call with a non-JSON 502.
type methodCounter struct {
	mu       sync.Mutex
	counts   map[string]int // "path method" -> requests
	failNext atomic.Bool
}

func (m *methodCounter) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &msg)
		m.mu.Lock()
		m.counts[r.URL.Path+" "+msg.Method]++
		m.mu.Unlock()
		if msg.Method == "tools/call" && m.failNext.CompareAndSwap(true, false) {
			http.Error(w, "upstream unavailable", http.StatusBadGateway)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// handshakes returns how many session set-ups (discover or initialize) hit path.
func (m *methodCounter) handshakes(path string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts[path+" server/discover"] + m.counts[path+" initialize"]
}

func TestSessionReusedPerTenant(t *testing.T) {
	mc := &methodCounter{counts: map[string]int{}}
	env := newTestEnv(t, DemoConfig{}, Config{}, mc.wrap)
	ctx := testCtx(t)

	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tenant := []string{"acme", "beta"}[i%2]
			if _, err := env.client.Call(ctx, tenant, SkillOutletList, nil, ""); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, tenant := range []string{"acme", "beta"} {
		if n := mc.handshakes("/tenants/" + tenant + "/mcp"); n != 1 {
			t.Fatalf("tenant %s: %d session handshakes, want 1", tenant, n)
		}
	}
}

func TestSessionRecreatedAfterTransportError(t *testing.T) {
	mc := &methodCounter{counts: map[string]int{}}
	env := newTestEnv(t, DemoConfig{}, Config{}, mc.wrap)
	ctx := testCtx(t)
	const path = "/tenants/beta/mcp"

	if _, err := env.client.Call(ctx, "beta", SkillOutletList, nil, "a"); err != nil {
		t.Fatal(err)
	}
	mc.failNext.Store(true)
	if _, err := env.client.Call(ctx, "beta", SkillOutletList, nil, "b"); err != nil {
		t.Fatalf("call after transport failure: %v", err)
	}
	if n := mc.handshakes(path); n != 2 {
		t.Fatalf("%d session handshakes, want 2 (initial + re-created)", n)
	}
	if got := env.svc.Invocations(); got["a"] != 1 || got["b"] != 1 {
		t.Fatalf("Invocations() = %v", got)
	}
}

func TestCallTimeout(t *testing.T) {
	env := newTestEnv(t, DemoConfig{Latency: 2 * time.Second}, Config{Timeout: 300 * time.Millisecond}, nil)
	start := time.Now()
	_, err := env.client.Call(context.Background(), "beta", SkillOutletList, nil, "slow")
	if err == nil {
		t.Fatal("expected a timeout error")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Logf("timeout error (not DeadlineExceeded): %v", err)
	}
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Fatalf("call took %v despite 300ms timeout", d)
	}
	// The call was abandoned during its latency, before its effect: once
	// the latency has passed, the skill has still executed nothing, and
	// the key is free for a later attempt.
	time.Sleep(2500 * time.Millisecond)
	if n := env.svc.Calls(SkillOutletList); n != 0 {
		t.Fatalf("outlet_list executed %d times, want 0", n)
	}
}

func TestClientClose(t *testing.T) {
	env := newTestEnv(t, DemoConfig{}, Config{}, nil)
	ctx := testCtx(t)
	if _, err := env.client.Find(ctx, "beta", "outlets", 1); err != nil {
		t.Fatal(err)
	}
	if err := env.client.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := env.client.Find(ctx, "beta", "outlets", 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Find after Close err = %v, want ErrClosed", err)
	}
}

func TestNewClientValidatesConfig(t *testing.T) {
	bad := []Config{
		{},
		{URL: "127.0.0.1:7070/tenants/{tenant}/mcp"},
		{URL: "ftp://host/tenants/{tenant}/mcp"},
		{URL: "http://host/tenants/{tenant}/mcp", Timeout: -time.Second},
		{URL: "http://host/tenants/{tenant}/mcp", ToolsTTL: -time.Second},
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
	if c.cfg.Timeout != DefaultTimeout || c.cfg.ToolsTTL != DefaultToolsTTL ||
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

// TestPlainMCPToolsList checks the service with a stock mcp-go client: tools
// are scoped per tenant and advertise their input schemas.
func TestPlainMCPToolsList(t *testing.T) {
	env := newTestEnv(t, DemoConfig{}, Config{}, nil)
	ctx := testCtx(t)

	list := func(tenant string) map[string]mcp.Tool {
		t.Helper()
		c, err := mcpclient.NewStreamableHttpClient(env.srv.URL + "/tenants/" + tenant + "/mcp")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		init := mcp.InitializeRequest{}
		init.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "0"}
		if _, err := c.Initialize(ctx, init); err != nil {
			t.Fatal(err)
		}
		res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]mcp.Tool{}
		for _, tool := range res.Tools {
			out[tool.Name] = tool
		}
		return out
	}

	acme, beta := list("acme"), list("beta")
	wantBeta := []string{SkillEngagementAnalytics, ToolFindRelevantSkills, ToolLoadSkill, SkillMenuCatalog, SkillOutletList}
	var gotBeta []string
	for name := range beta {
		gotBeta = append(gotBeta, name)
	}
	slices.Sort(gotBeta)
	slices.Sort(wantBeta)
	if !slices.Equal(gotBeta, wantBeta) {
		t.Fatalf("beta tools = %v, want %v", gotBeta, wantBeta)
	}
	if _, ok := acme[SkillAcmeLoyaltyReport]; !ok || len(acme) != len(beta)+1 {
		t.Fatalf("acme tools = %v", acme)
	}
	raw, err := json.Marshal(beta[SkillOutletList])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"enum":["active","inactive","all"]`) {
		t.Fatalf("outlet_list tool lacks its input schema: %s", raw)
	}
	raw, _ = json.Marshal(beta[ToolFindRelevantSkills])
	if !strings.Contains(string(raw), `"required":["query"]`) {
		t.Fatalf("find_relevant_skills tool lacks its input schema: %s", raw)
	}
}

func TestRelevance(t *testing.T) {
	if got := text.Tokens("List the brand's outlets (stores), ranking_status", nil); !slices.Equal(got,
		[]string{"list", "brand", "outlet", "store", "rank", "status"}) {
		t.Fatalf("tokens = %v", got)
	}
	if relevance("", "outlet_list", "anything") != 0 {
		t.Fatal("empty query must score 0")
	}
	catalog := []*demoSkill{
		{name: "b_skill", description: "same words"},
		{name: "a_skill", description: "same words"},
		{name: "other", description: "unrelated"},
	}
	got := rankSkills("same words", catalog)
	if len(got) != 2 || got[0].Name != "a_skill" || got[1].Name != "b_skill" || got[0].Score != got[1].Score {
		t.Fatalf("rankSkills = %+v", got)
	}
}
