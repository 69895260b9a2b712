package skills

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testEnv is a demo service on a real loopback listener plus a real Client.
type testEnv struct {
	svc    *DemoService
	srv    *httptest.Server
	client *Client
}

// newTestEnv starts the demo service, optionally wrapped, and a Client for it.
func newTestEnv(t *testing.T, cfg DemoConfig, clientCfg Config, wrap func(http.Handler) http.Handler) *testEnv {
	t.Helper()
	svc := NewDemoService(cfg)
	h := svc.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	clientCfg.URL = srv.URL + "/tenants/{tenant}/mcp"
	c, err := NewClient(clientCfg)
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

func names(ss []Summary) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.Name
	}
	return out
}

func TestFindRanksRelevantSkills(t *testing.T) {
	env := newTestEnv(t, DemoConfig{}, Config{}, nil)
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
			if s.Name == ToolFindRelevantSkills || s.Name == ToolLoadSkill {
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
	env := newTestEnv(t, DemoConfig{}, Config{}, nil)
	ctx := testCtx(t)
	for _, name := range []string{SkillOutletList, SkillEngagementAnalytics, SkillMenuCatalog} {
		m, err := env.client.Load(ctx, "beta", name)
		if err != nil {
			t.Fatalf("Load(%s): %v", name, err)
		}
		if m.Name != name || m.Description == "" || m.ExecutionMode != ExecutionModeSync {
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
	if _, err := env.client.Load(ctx, "beta", "no_such_skill"); !errors.Is(err, ErrSkillNotFound) {
		t.Fatalf("Load(unknown) err = %v, want ErrSkillNotFound", err)
	}
	if _, err := env.client.Load(ctx, "beta", ToolLoadSkill); !errors.Is(err, ErrSkillNotFound) {
		t.Fatalf("Load(load_skill) err = %v, want ErrSkillNotFound", err)
	}
}

func callOutlets(t *testing.T, c *Client, args string) []outlet {
	t.Helper()
	out, err := c.Call(testCtx(t), "beta", SkillOutletList, json.RawMessage(args), "")
	if err != nil {
		t.Fatalf("Call(outlet_list, %s): %v", args, err)
	}
	var res struct {
		Outlets []outlet `json:"outlets"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("decode %s: %v", out, err)
	}
	return res.Outlets
}

func TestCallOutletList(t *testing.T) {
	env := newTestEnv(t, DemoConfig{}, Config{}, nil)
	active := callOutlets(t, env.client, `{"status":"active"}`)
	if len(active) != 8 {
		t.Fatalf("active outlets = %d, want 8", len(active))
	}
	for _, o := range active {
		if o.Status != "active" || o.OutletID == "" || o.Name == "" || o.City == "" {
			t.Fatalf("bad outlet %+v", o)
		}
	}
	if all := callOutlets(t, env.client, ``); len(all) != 12 {
		t.Fatalf("all outlets = %d, want 12", len(all))
	}
	if inactive := callOutlets(t, env.client, `{"status":"inactive"}`); len(inactive) != 4 {
		t.Fatalf("inactive outlets = %d, want 4", len(inactive))
	}
	_, err := env.client.Call(testCtx(t), "beta", SkillOutletList, json.RawMessage(`{"status":"closed"}`), "")
	if !errors.Is(err, ErrSkillFailed) {
		t.Fatalf("bad status err = %v, want ErrSkillFailed", err)
	}
	_, err = env.client.Call(testCtx(t), "beta", SkillOutletList, json.RawMessage(`[1]`), "")
	if !errors.Is(err, ErrInvalidArguments) {
		t.Fatalf("array args err = %v, want ErrInvalidArguments", err)
	}
}

func TestCallEngagementAnalytics(t *testing.T) {
	env := newTestEnv(t, DemoConfig{}, Config{}, nil)
	ctx := testCtx(t)
	ids := make([]string, 0, len(demoOutlets))
	for _, o := range demoOutlets {
		ids = append(ids, o.OutletID)
	}
	args, _ := json.Marshal(map[string]any{"outlet_ids": ids})
	first, err := env.client.Call(ctx, "beta", SkillEngagementAnalytics, args, "")
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Results []engagementResult `json:"results"`
	}
	if err := json.Unmarshal(first, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Results) != len(ids) {
		t.Fatalf("got %d results, want %d", len(res.Results), len(ids))
	}
	for i, r := range res.Results {
		if r.Rank != i+1 {
			t.Fatalf("result %d has rank %d", i, r.Rank)
		}
		if r.Score < 0 || r.Score > 100 || r.Score*10 != float64(int(r.Score*10+0.5)) {
			t.Fatalf("bad score %v", r.Score)
		}
		if i > 0 && res.Results[i-1].Score < r.Score {
			t.Fatalf("not sorted by score desc: %+v", res.Results)
		}
		if r.Name == "" {
			t.Fatalf("missing name in %+v", r)
		}
	}
	second, err := env.client.Call(ctx, "beta", SkillEngagementAnalytics, args, "")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Fatalf("engagement_analytics is not deterministic:\n%s\n%s", first, second)
	}
	_, err = env.client.Call(ctx, "beta", SkillEngagementAnalytics, json.RawMessage(`{"outlet_ids":["out-001","out-999"]}`), "")
	if !errors.Is(err, ErrSkillFailed) || !strings.Contains(err.Error(), "out-999") {
		t.Fatalf("unknown outlet err = %v, want ErrSkillFailed naming out-999", err)
	}
}

func TestTenantScoping(t *testing.T) {
	env := newTestEnv(t, DemoConfig{}, Config{}, nil)
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
	if _, err := env.client.Load(ctx, "beta", SkillAcmeLoyaltyReport); !errors.Is(err, ErrSkillNotFound) {
		t.Fatalf("beta Load err = %v, want ErrSkillNotFound", err)
	}
	if _, err := env.client.Call(ctx, "beta", SkillAcmeLoyaltyReport, nil, "k"); !errors.Is(err, ErrSkillNotFound) {
		t.Fatalf("beta Call err = %v, want ErrSkillNotFound", err)
	}
	if n := env.svc.Calls(SkillAcmeLoyaltyReport); n != 1 {
		t.Fatalf("acme_loyalty_report ran %d times, want 1", n)
	}
}

func TestMenuCatalogSize(t *testing.T) {
	env := newTestEnv(t, DemoConfig{}, Config{}, nil)
	ctx := testCtx(t)
	for _, args := range []string{`{}`, `{"outlet_id":"out-004"}`} {
		out, err := env.client.Call(ctx, "beta", SkillMenuCatalog, json.RawMessage(args), "")
		if err != nil {
			t.Fatal(err)
		}
		if len(out) < 900_000 || len(out) > 1_200_000 {
			t.Fatalf("menu_catalog(%s) is %d bytes, want 900KB..1.2MB", args, len(out))
		}
		var res struct {
			Items []menuItem `json:"items"`
		}
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatal(err)
		}
		if len(res.Items) != menuItemCount || res.Items[0].Description == "" || res.Items[0].Allergens == nil {
			t.Fatalf("unexpected items: %d, first %+v", len(res.Items), res.Items[0])
		}
	}
	_, err := env.client.Call(ctx, "beta", SkillMenuCatalog, json.RawMessage(`{"outlet_id":"nope"}`), "")
	if !errors.Is(err, ErrSkillFailed) {
		t.Fatalf("unknown outlet err = %v, want ErrSkillFailed", err)
	}
}

func TestIdempotencyKeysAndFailFirst(t *testing.T) {
	env := newTestEnv(t, DemoConfig{FailFirst: map[string]int{SkillOutletList: 1}}, Config{}, nil)
	ctx := testCtx(t)

	_, err := env.client.Call(ctx, "beta", SkillOutletList, nil, "key-1")
	if !errors.Is(err, ErrSkillFailed) || !strings.Contains(err.Error(), InjectedFailureMessage) {
		t.Fatalf("first call err = %v, want injected ErrSkillFailed", err)
	}
	// The same key is answered from the record: the failure is replayed,
	// the skill does not run again.
	_, err = env.client.Call(ctx, "beta", SkillOutletList, nil, "key-1")
	if !errors.Is(err, ErrSkillFailed) {
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

func TestAPIKeyHeaderAndRedaction(t *testing.T) {
	const key = "sk-test-7f3a9c1e5b"
	var mu sync.Mutex
	seen := map[string]int{}
	wrap := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen[r.Header.Get("X-Api-Key")]++
			mu.Unlock()
			if strings.Contains(r.URL.Path, "/tenants/echo/") {
				// A misbehaving server that echoes the key back.
				http.Error(w, "rejected key "+r.Header.Get("X-Api-Key"), http.StatusBadGateway)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	env := newTestEnv(t, DemoConfig{FailFirst: map[string]int{SkillOutletList: 1}}, Config{APIKey: key}, wrap)
	ctx := testCtx(t)

	if _, err := env.client.Find(ctx, "beta", "outlets", 1); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if seen[key] == 0 || len(seen) != 1 {
		t.Fatalf("X-Api-Key values seen = %v", seen)
	}
	mu.Unlock()

	var errs []error
	_, err := env.client.Call(ctx, "beta", SkillOutletList, nil, key) // tool error
	errs = append(errs, err)
	_, err = env.client.Call(ctx, "echo", SkillOutletList, nil, "") // HTTP error echoing the key
	errs = append(errs, err)
	_, err = env.client.Load(ctx, "echo", SkillOutletList)
	errs = append(errs, err)
	_, err = env.client.Call(ctx, "beta/../x", SkillOutletList, nil, "")
	errs = append(errs, err)
	for i, err := range errs {
		if err == nil {
			t.Fatalf("case %d: expected an error", i)
		}
		if strings.Contains(err.Error(), key) {
			t.Fatalf("case %d: error leaks the API key: %v", i, err)
		}
	}
}

func TestInvalidTenantRejected(t *testing.T) {
	var requests atomic.Int64
	wrap := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			requests.Add(1)
			next.ServeHTTP(w, r)
		})
	}
	env := newTestEnv(t, DemoConfig{}, Config{}, wrap)
	ctx := testCtx(t)
	bad := []string{"", "a/b", "../acme", "acme/../beta", "a b", "ac%2Fme", "tenant?x=1", "acme#x", "ümlaut", strings.Repeat("a", 65)}
	for _, tenant := range bad {
		if _, err := env.client.Find(ctx, tenant, "outlets", 1); !errors.Is(err, ErrInvalidTenant) {
			t.Fatalf("Find(%q) err = %v, want ErrInvalidTenant", tenant, err)
		}
		if _, err := env.client.Load(ctx, tenant, SkillOutletList); !errors.Is(err, ErrInvalidTenant) {
			t.Fatalf("Load(%q) err = %v, want ErrInvalidTenant", tenant, err)
		}
		if _, err := env.client.Call(ctx, tenant, SkillOutletList, nil, ""); !errors.Is(err, ErrInvalidTenant) {
			t.Fatalf("Call(%q) err = %v, want ErrInvalidTenant", tenant, err)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("%d requests reached the server for invalid tenants", n)
	}
	if _, err := env.client.Find(ctx, strings.Repeat("a", 64), "outlets", 1); err != nil {
		t.Fatalf("64-char tenant: %v", err)
	}

	// The service enforces the same rule on its own.
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
}

// TestLoadReusesManifests: an executor loads its step's skills on every
// turn; within ToolsTTL the second load sends nothing, and a different
// tenant or API key is loaded on its own.
func TestLoadReusesManifests(t *testing.T) {
	var mu sync.Mutex
	requests := 0
	env := newTestEnv(t, DemoConfig{}, Config{}, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			requests++
			mu.Unlock()
			next.ServeHTTP(w, r)
		})
	})
	count := func() int { mu.Lock(); defer mu.Unlock(); return requests }
	ctx := testCtx(t)
	first, err := env.client.Load(ctx, "beta", SkillOutletList)
	if err != nil {
		t.Fatal(err)
	}
	before := count()
	again, err := env.client.Load(ctx, "beta", SkillOutletList)
	if err != nil || again.Name != first.Name || string(again.OutputSchema) != string(first.OutputSchema) {
		t.Fatalf("second load = %+v, %v", again, err)
	}
	if n := count() - before; n != 0 {
		t.Fatalf("second load sent %d requests, want 0", n)
	}
	if _, err := env.client.Load(ctx, "acme", SkillOutletList); err != nil {
		t.Fatal(err)
	}
	if count() == before {
		t.Fatal("another tenant's load was answered from beta's cache")
	}
	before = count()
	if _, err := env.client.Load(WithAPIKey(ctx, "other-key"), "beta", SkillOutletList); err != nil {
		t.Fatal(err)
	}
	if count() == before {
		t.Fatal("a load with another API key was answered from the cache")
	}
}
