package demo

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/agentbus/agentbus/skills"
)

// testEnv is a Service on a real loopback listener plus a real
// skills.Client for it.
type testEnv struct {
	svc    *Service
	srv    *httptest.Server
	client *skills.Client
}

// newTestEnv starts a Service, optionally wrapped, and a skills.Client for
// it.
func newTestEnv(t *testing.T, cfg Config, clientCfg skills.Config, wrap func(http.Handler) http.Handler) *testEnv {
	t.Helper()
	svc := NewService(cfg)
	h := svc.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	clientCfg.URL = srv.URL + "/tenants/{tenant}/mcp"
	c, err := skills.NewClient(clientCfg)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &testEnv{svc: svc, srv: srv, client: c}
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func names(ss []skills.Summary) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.Name
	}
	return out
}

func TestFindRanksRelevantSkills(t *testing.T) {
	env := newTestEnv(t, Config{}, skills.Config{}, nil)
	ctx := testCtx(t)

	cases := []struct {
		query string
		want  string
	}{
		{"list active outlets", SkillOutletList},
		{"rank outlets by engagement", SkillEngagementAnalytics},
		{"full menu with every item", SkillMenuCatalog},
	}
	for _, tc := range cases {
		got, err := env.client.Find(ctx, "beta", tc.query, 3)
		if err != nil {
			t.Fatalf("Find(%q): %v", tc.query, err)
		}
		if len(got) == 0 || got[0].Name != tc.want {
			t.Fatalf("Find(%q) = %v, want %s first", tc.query, names(got), tc.want)
		}
		if len(got) > 3 {
			t.Fatalf("Find(%q) returned %d results, limit 3", tc.query, len(got))
		}
		for i, s := range got {
			if s.Name == skills.ToolFindRelevantSkills || s.Name == skills.ToolLoadSkill {
				t.Fatalf("Find returned discovery tool %s", s.Name)
			}
			if s.Description == "" || s.Score <= 0 || s.Score > 1 {
				t.Fatalf("bad summary %+v", s)
			}
			if i > 0 && got[i-1].Score < s.Score {
				t.Fatalf("results not sorted by score: %v", got)
			}
		}
	}
}

func TestLoadManifests(t *testing.T) {
	env := newTestEnv(t, Config{}, skills.Config{}, nil)
	ctx := testCtx(t)
	for _, name := range []string{SkillOutletList, SkillEngagementAnalytics, SkillMenuCatalog} {
		m, err := env.client.Load(ctx, "beta", name)
		if err != nil {
			t.Fatalf("Load(%s): %v", name, err)
		}
		if m.Name != name || m.Description == "" || m.ExecutionMode != skills.ExecutionModeSync {
			t.Fatalf("Load(%s) = %+v", name, m)
		}
		for _, schema := range []json.RawMessage{m.InputSchema, m.OutputSchema} {
			var obj map[string]any
			if err := json.Unmarshal(schema, &obj); err != nil {
				t.Fatalf("%s: schema %s: %v", name, schema, err)
			}
			if obj["type"] != "object" {
				t.Fatalf("%s: schema type = %v, want object", name, obj["type"])
			}
		}
	}
	m, err := env.client.Load(ctx, "beta", SkillEngagementAnalytics)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(m.InputSchema), `"required":["outlet_ids"]`) {
		t.Fatalf("engagement_analytics input schema lacks required outlet_ids: %s", m.InputSchema)
	}
	if _, err := env.client.Load(ctx, "beta", "no_such_skill"); !errors.Is(err, skills.ErrSkillNotFound) {
		t.Fatalf("Load(unknown) err = %v, want ErrSkillNotFound", err)
	}
	if _, err := env.client.Load(ctx, "beta", skills.ToolLoadSkill); !errors.Is(err, skills.ErrSkillNotFound) {
		t.Fatalf("Load(load_skill) err = %v, want ErrSkillNotFound", err)
	}
}

func TestTenantScoping(t *testing.T) {
	env := newTestEnv(t, Config{}, skills.Config{}, nil)
	ctx := testCtx(t)
	const query = "loyalty programme report for members"

	found, err := env.client.Find(ctx, "acme", query, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) == 0 || found[0].Name != SkillAcmeLoyaltyReport {
		t.Fatalf("acme Find = %v, want acme_loyalty_report first", names(found))
	}
	if _, err := env.client.Load(ctx, "acme", SkillAcmeLoyaltyReport); err != nil {
		t.Fatalf("acme Load: %v", err)
	}
	out, err := env.client.Call(ctx, "acme", SkillAcmeLoyaltyReport, nil, "")
	if err != nil {
		t.Fatalf("acme Call: %v", err)
	}
	var report struct {
		Members    int            `json:"members"`
		TierCounts map[string]int `json:"tier_counts"`
	}
	if err := json.Unmarshal(out, &report); err != nil || report.Members == 0 || len(report.TierCounts) == 0 {
		t.Fatalf("report %s: %v", out, err)
	}

	found, err = env.client.Find(ctx, "beta", query, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range found {
		if s.Name == SkillAcmeLoyaltyReport {
			t.Fatalf("beta sees %s", s.Name)
		}
	}
	if _, err := env.client.Load(ctx, "beta", SkillAcmeLoyaltyReport); !errors.Is(err, skills.ErrSkillNotFound) {
		t.Fatalf("beta Load err = %v, want ErrSkillNotFound", err)
	}
	if _, err := env.client.Call(ctx, "beta", SkillAcmeLoyaltyReport, nil, "k"); !errors.Is(err, skills.ErrSkillNotFound) {
		t.Fatalf("beta Call err = %v, want ErrSkillNotFound", err)
	}
	if n := env.svc.Calls(SkillAcmeLoyaltyReport); n != 1 {
		t.Fatalf("acme_loyalty_report ran %d times, want 1", n)
	}
}

func TestIdempotencyKeysAndFailFirst(t *testing.T) {
	env := newTestEnv(t, Config{FailFirst: map[string]int{SkillOutletList: 1}}, skills.Config{}, nil)
	ctx := testCtx(t)

	_, err := env.client.Call(ctx, "beta", SkillOutletList, nil, "key-1")
	if !errors.Is(err, skills.ErrSkillFailed) || !strings.Contains(err.Error(), InjectedFailureMessage) {
		t.Fatalf("first call err = %v, want injected ErrSkillFailed", err)
	}
	// The same key is answered from the record: the failure is replayed,
	// the skill does not run again.
	_, err = env.client.Call(ctx, "beta", SkillOutletList, nil, "key-1")
	if !errors.Is(err, skills.ErrSkillFailed) {
		t.Fatalf("replayed call err = %v, want the recorded failure", err)
	}
	first, err := env.client.Call(ctx, "beta", SkillOutletList, nil, "key-2")
	if err != nil {
		t.Fatalf("new key: %v", err)
	}
	again, err := env.client.Call(ctx, "beta", SkillOutletList, nil, "key-2")
	if err != nil || string(again) != string(first) {
		t.Fatalf("replay of key-2 = %q, %v; want the recorded result", again, err)
	}
	if _, err := env.client.Call(ctx, "beta", SkillEngagementAnalytics, json.RawMessage(`{"outlet_ids":["out-001"]}`), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := env.client.Find(ctx, "beta", "outlets", 0); err != nil {
		t.Fatal(err)
	}

	got := env.svc.Invocations()
	if len(got) != 3 || got["key-1"] != 1 || got["key-2"] != 1 || got[""] != 1 {
		t.Fatalf("Invocations() = %v, want one execution per key", got)
	}
	if r := env.svc.Replays(); r["key-1"] != 1 || r["key-2"] != 1 {
		t.Fatalf("Replays() = %v, want one replay per key", r)
	}
	if n := env.svc.Calls(SkillOutletList); n != 2 {
		t.Fatalf("Calls(outlet_list) = %d, want 2", n)
	}

	// GET /invocations reports both, for a harness that runs the service
	// as a separate process.
	resp, err := http.Get(env.srv.URL + "/invocations")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep InvocationReport
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Fatalf("decode /invocations: %v", err)
	}
	if len(rep.Executions) != 3 || rep.Executions["key-1"] != 1 || rep.Executions["key-2"] != 1 || rep.Executions[""] != 1 {
		t.Fatalf("/invocations executions = %v, want one execution per key", rep.Executions)
	}
	if len(rep.Replays) != 2 || rep.Replays["key-1"] != 1 || rep.Replays["key-2"] != 1 {
		t.Fatalf("/invocations replays = %v, want one replay per key", rep.Replays)
	}
}

// TestPlainMCPToolsList checks the service with a stock mcp-go client: tools
// are scoped per tenant and advertise their input schemas.
func TestPlainMCPToolsList(t *testing.T) {
	env := newTestEnv(t, Config{}, skills.Config{}, nil)
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
	wantBeta := []string{SkillEngagementAnalytics, skills.ToolFindRelevantSkills, skills.ToolLoadSkill, SkillMenuCatalog, SkillOutletList}
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
	raw, _ = json.Marshal(beta[skills.ToolFindRelevantSkills])
	if !strings.Contains(string(raw), `"required":["query"]`) {
		t.Fatalf("find_relevant_skills tool lacks its input schema: %s", raw)
	}
}

// TestInvalidTenantPath: the service validates the {tenant} path segment
// on its own, as the client does.
func TestInvalidTenantPath(t *testing.T) {
	env := newTestEnv(t, Config{}, skills.Config{}, nil)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`
	resp, err := http.Post(env.srv.URL+"/tenants/a.b/mcp", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("invalid tenant path status = %d, want 404", resp.StatusCode)
	}
	if err := NewService(Config{}).ServeStdio(context.Background(), "a/b", strings.NewReader(""), io.Discard); !errors.Is(err, skills.ErrInvalidTenant) {
		t.Fatalf("ServeStdio(a/b) err = %v, want ErrInvalidTenant", err)
	}
}
