package skills_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/skills/demo"
)

// stdioTenantEnv makes the test binary serve the demo catalog of the named
// tenant over stdio (see TestStdioDemoHelper).
const stdioTenantEnv = "AGENTBUS_SKILLS_TEST_STDIO_TENANT"

// TestStdioDemoHelper is not a test: run by stdioDemoCommand as a child
// process, it serves the demo Skill Service over stdio. In a normal test
// run it returns at once.
func TestStdioDemoHelper(t *testing.T) {
	tenant := os.Getenv(stdioTenantEnv)
	if tenant == "" {
		return
	}
	if err := demo.NewService(demo.Config{}).ServeStdio(context.Background(), tenant, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "serve stdio:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// stdioDemoConfig is a stdio Config whose command is this test binary
// serving tenant's demo catalog.
func stdioDemoConfig(tenant string) skills.Config {
	return skills.Config{
		Transport: skills.TransportStdio,
		Command:   []string{os.Args[0], "-test.run=^TestStdioDemoHelper$", "-test.count=1"},
		// The race detector sleeps a second before a process exits unless told not to.
		Env: []string{stdioTenantEnv + "=" + tenant, "GORACE=atexit_sleep_ms=0"},
	}
}

// newDemoServer starts the demo service on a loopback listener.
func newDemoServer(t *testing.T, wrap func(http.Handler) http.Handler) *httptest.Server {
	t.Helper()
	h := demo.NewService(demo.Config{}).Handler()
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func newClient(t *testing.T, cfg skills.Config) *skills.Client {
	t.Helper()
	c, err := skills.NewClient(cfg)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestTransportsSkillService runs discovery, manifests and calls against
// the demo Skill Service over each transport, with the mode auto-detected.
func TestTransportsSkillService(t *testing.T) {
	srv := newDemoServer(t, nil)
	cases := map[string]skills.Config{
		skills.TransportStreamableHTTP: {URL: srv.URL + "/tenants/{tenant}/mcp"},
		skills.TransportSSE:            {Transport: skills.TransportSSE, URL: srv.URL + "/tenants/{tenant}/sse"},
		skills.TransportStdio:          stdioDemoConfig("acme"),
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newClient(t, cfg)
			ctx := testCtx(t)

			got, err := c.Find(ctx, "acme", "loyalty report for members", 3)
			if err != nil {
				t.Fatalf("Find: %v", err)
			}
			if len(got) == 0 || got[0].Name != demo.SkillAcmeLoyaltyReport {
				t.Fatalf("Find = %v, want %s first", names(got), demo.SkillAcmeLoyaltyReport)
			}
			m, err := c.Load(ctx, "acme", demo.SkillOutletList)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			// A Skill Service manifest carries the service's own output schema.
			if !strings.Contains(string(m.OutputSchema), `"outlets"`) || m.ExecutionMode != skills.ExecutionModeSync {
				t.Fatalf("Load = %+v", m)
			}
			out, err := c.Call(ctx, "acme", demo.SkillOutletList, json.RawMessage(`{"status":"inactive"}`), "")
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			var res struct {
				Outlets []json.RawMessage `json:"outlets"`
			}
			if err := json.Unmarshal(out, &res); err != nil || len(res.Outlets) != 4 {
				t.Fatalf("Call = %s (%v)", out, err)
			}
			if _, err := c.Call(ctx, "acme", "no_such_skill", nil, ""); !errors.Is(err, skills.ErrSkillNotFound) {
				t.Fatalf("Call(unknown) err = %v, want ErrSkillNotFound", err)
			}
			if _, err := c.Find(ctx, "../acme", "outlets", 1); !errors.Is(err, skills.ErrInvalidTenant) {
				t.Fatalf("Find(bad tenant) err = %v, want ErrInvalidTenant", err)
			}
		})
	}
}

// TestTransportTenantScope: HTTP transports scope by the URL; a stdio
// server is single-scope, so every tenant reaches the configured one.
func TestTransportTenantScope(t *testing.T) {
	srv := newDemoServer(t, nil)
	ctx := testCtx(t)
	sse := newClient(t, skills.Config{Transport: skills.TransportSSE, URL: srv.URL + "/tenants/{tenant}/sse"})
	if _, err := sse.Load(ctx, "beta", demo.SkillAcmeLoyaltyReport); !errors.Is(err, skills.ErrSkillNotFound) {
		t.Fatalf("SSE: beta loads acme's skill: err = %v", err)
	}
	if _, err := sse.Load(ctx, "acme", demo.SkillAcmeLoyaltyReport); err != nil {
		t.Fatalf("SSE: acme: %v", err)
	}

	stdio := newClient(t, stdioDemoConfig("beta"))
	for _, tenant := range []string{"acme", "beta"} {
		if _, err := stdio.Load(ctx, tenant, demo.SkillAcmeLoyaltyReport); !errors.Is(err, skills.ErrSkillNotFound) {
			t.Fatalf("stdio scoped to beta: tenant %s loads acme's skill: err = %v", tenant, err)
		}
	}
	if _, err := stdio.Find(ctx, "bad/tenant", "outlets", 1); !errors.Is(err, skills.ErrInvalidTenant) {
		t.Fatalf("stdio: bad tenant err = %v, want ErrInvalidTenant", err)
	}
}

// TestPlainModeOverDemo uses the demo service as a plain MCP server: its
// tools/list is the catalog, ranked locally.
func TestPlainModeOverDemo(t *testing.T) {
	mc := &methodCounter{counts: map[string]int{}}
	srv := newDemoServer(t, mc.wrap)
	c := newClient(t, skills.Config{URL: srv.URL + "/tenants/{tenant}/mcp", Mode: skills.ModePlain})
	ctx := testCtx(t)

	got, err := c.Find(ctx, "beta", "rank outlets by engagement", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || got[0].Name != demo.SkillEngagementAnalytics || slices.Contains(names(got), skills.ToolFindRelevantSkills) {
		t.Fatalf("Find = %+v", got)
	}
	m, err := c.Load(ctx, "beta", demo.SkillOutletList)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(m.InputSchema), `"enum":["active","inactive","all"]`) ||
		string(m.OutputSchema) != string(skills.TextOutputSchema) || m.ExecutionMode != skills.ExecutionModeSync {
		t.Fatalf("Load = %s / %s / %s", m.InputSchema, m.OutputSchema, m.ExecutionMode)
	}
	for _, name := range []string{skills.ToolLoadSkill, demo.SkillAcmeLoyaltyReport, "nope"} {
		if _, err := c.Load(ctx, "beta", name); !errors.Is(err, skills.ErrSkillNotFound) {
			t.Fatalf("Load(%s) err = %v, want ErrSkillNotFound", name, err)
		}
	}
	out, err := c.Call(ctx, "beta", demo.SkillOutletList, json.RawMessage(`{"status":"active"}`), "k1")
	if err != nil {
		t.Fatal(err)
	}
	var wrapped map[string]string
	if err := json.Unmarshal(out, &wrapped); err != nil || !strings.Contains(wrapped[skills.TextOutputField], `"out-001"`) {
		t.Fatalf("Call = %s (%v)", out, err)
	}
	if _, err := c.Call(ctx, "beta", "nope", nil, ""); !errors.Is(err, skills.ErrSkillNotFound) {
		t.Fatalf("Call(nope) err = %v, want ErrSkillNotFound", err)
	}
	// One listing served Find, Load and Call; the unknown names each
	// forced one refresh (3 Loads + 1 Call).
	if n := mc.count("/tenants/beta/mcp tools/list"); n != 1+4 {
		t.Fatalf("tools/list requests = %d, want 5", n)
	}
}

// TestToolsListCached: the tools/list answer is reused for ToolsTTL, then
// fetched again.
func TestToolsListCached(t *testing.T) {
	mc := &methodCounter{counts: map[string]int{}}
	srv := newDemoServer(t, mc.wrap)
	c := newClient(t, skills.Config{URL: srv.URL + "/tenants/{tenant}/mcp", Mode: skills.ModePlain, ToolsTTL: 300 * time.Millisecond})
	ctx := testCtx(t)
	for range 3 {
		if _, err := c.Find(ctx, "beta", "outlets", 0); err != nil {
			t.Fatal(err)
		}
	}
	if n := mc.count("/tenants/beta/mcp tools/list"); n != 1 {
		t.Fatalf("tools/list requests = %d, want 1", n)
	}
	time.Sleep(400 * time.Millisecond)
	if _, err := c.Find(ctx, "beta", "outlets", 0); err != nil {
		t.Fatal(err)
	}
	if n := mc.count("/tenants/beta/mcp tools/list"); n != 2 {
		t.Fatalf("tools/list requests after the TTL = %d, want 2", n)
	}
}

// TestAPIKeyPerCall: one client, many callers: each request carries the
// key of the call's context, else Config.APIKey, on both HTTP transports;
// no error shows a key.
func TestAPIKeyPerCall(t *testing.T) {
	const (
		keyA   = "sk-caller-a-91c2"
		keyB   = "sk-caller-b-5e7d"
		keyCfg = "sk-config-0b44"
	)
	var mu sync.Mutex
	seen := map[string][]string{} // "METHOD path" -> keys, in order
	srv := newDemoServer(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			k := r.Method + " " + r.URL.Path
			seen[k] = append(seen[k], r.Header.Get("X-Api-Key"))
			mu.Unlock()
			if strings.Contains(r.URL.Path, "/tenants/echo/") {
				http.Error(w, "rejected key "+r.Header.Get("X-Api-Key"), http.StatusBadGateway)
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	keysOf := func(k string) []string {
		mu.Lock()
		defer mu.Unlock()
		out := slices.Clone(seen[k])
		delete(seen, k)
		return out
	}

	for _, tc := range []struct {
		transport, path string
		post            string // the path the tools/call requests go to
	}{
		{skills.TransportStreamableHTTP, "/tenants/{tenant}/mcp", "POST /tenants/beta/mcp"},
		{skills.TransportSSE, "/tenants/{tenant}/sse", "POST /tenants/beta/message"},
	} {
		t.Run(tc.transport, func(t *testing.T) {
			c := newClient(t, skills.Config{Transport: tc.transport, URL: srv.URL + tc.path, APIKey: keyCfg, Mode: skills.ModeSkillService})
			ctx := testCtx(t)
			// Open the session first so that the calls below are one request each.
			if _, err := c.Call(ctx, "beta", demo.SkillOutletList, nil, ""); err != nil {
				t.Fatal(err)
			}
			if tc.transport == skills.TransportSSE {
				// The caller-less session's stream, opened with the config key.
				if got := keysOf("GET /tenants/beta/sse"); !slices.Equal(got, []string{keyCfg}) {
					t.Fatalf("SSE stream keys = %v", got)
				}
			}
			keysOf(tc.post)
			for _, key := range []string{keyA, keyB, keyA} {
				if _, err := c.Call(skills.WithAPIKey(ctx, key), "beta", demo.SkillOutletList, nil, ""); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := c.Call(skills.WithAPIKey(ctx, ""), "beta", demo.SkillOutletList, nil, ""); err != nil {
				t.Fatal(err)
			}
			got := keysOf(tc.post)
			if tc.transport == skills.TransportSSE {
				// Each new key opened its own stream, whose handshake sent
				// more than one message; every message carried its caller's key.
				if streams := keysOf("GET /tenants/beta/sse"); !slices.Equal(streams, []string{keyA, keyB}) {
					t.Fatalf("SSE streams opened with keys %v, want one per new key", streams)
				}
				got = compact(got)
			}
			if want := []string{keyA, keyB, keyA, keyCfg}; !slices.Equal(got, want) {
				t.Fatalf("keys of the calls = %v, want %v", got, want)
			}

			_, err := c.Call(skills.WithAPIKey(ctx, keyB), "echo", demo.SkillOutletList, nil, "")
			if err == nil || strings.Contains(err.Error(), keyB) || strings.Contains(err.Error(), keyCfg) {
				t.Fatalf("error of a key-echoing server = %v", err)
			}
		})
	}
}

// compact drops consecutive repeats: the SSE handshake of a new stream
// (discover or initialize, then tools/call) sends several requests with
// the same key.
func compact(keys []string) []string {
	var out []string
	for i, k := range keys {
		if i == 0 || k != keys[i-1] {
			out = append(out, k)
		}
	}
	return out
}

// TestStdioServerRestarted: a stdio server that exits is started again by
// the next call.
func TestStdioServerRestarted(t *testing.T) {
	c := newClient(t, stdioDemoConfig("beta"))
	ctx := testCtx(t)
	if _, err := c.Call(ctx, "beta", demo.SkillOutletList, nil, ""); err != nil {
		t.Fatal(err)
	}
	// Stop the process behind the client's back.
	skills.StopStdioServer(c)
	if _, err := c.Call(ctx, "beta", demo.SkillOutletList, nil, ""); err != nil {
		t.Fatalf("call after the server exited: %v", err)
	}
}

// TestRedirectNotFollowed: a Skill Service that redirects does not get the
// caller's API key sent to the redirect's target, on either HTTP
// transport; the call fails with ErrRedirect.
func TestRedirectNotFollowed(t *testing.T) {
	const key = "sk-redirect-3c9e"
	var leaked atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked.Add(1)
		http.Error(w, "not here", http.StatusNotFound)
	}))
	t.Cleanup(target.Close)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirector.Close)
	ctx := testCtx(t)
	for _, tc := range []struct {
		transport string
		path      string
	}{
		{skills.TransportStreamableHTTP, "/tenants/{tenant}/mcp"},
		{skills.TransportSSE, "/tenants/{tenant}/sse"},
	} {
		c := newClient(t, skills.Config{Transport: tc.transport, URL: redirector.URL + tc.path, APIKey: key})
		_, err := c.Find(ctx, "beta", "outlets", 1)
		if !errors.Is(err, skills.ErrRedirect) {
			t.Errorf("%s: Find err = %v, want ErrRedirect", tc.transport, err)
		}
	}
	if n := leaked.Load(); n != 0 {
		t.Fatalf("%d requests followed the redirect to another server", n)
	}
}
