package skills_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/skills/demo"
)

// testEnv is a demo service on a real loopback listener plus a real
// Client for it.
type testEnv struct {
	svc    *demo.Service
	srv    *httptest.Server
	client *skills.Client
}

// newTestEnv starts the demo service, optionally wrapped, and a Client for it.
func newTestEnv(t *testing.T, cfg demo.Config, clientCfg skills.Config, wrap func(http.Handler) http.Handler) *testEnv {
	t.Helper()
	svc := demo.NewService(cfg)
	h := svc.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	clientCfg.URL = srv.URL + "/tenants/{tenant}/mcp"
	return &testEnv{svc: svc, srv: srv, client: newClient(t, clientCfg)}
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
	env := newTestEnv(t, demo.Config{FailFirst: map[string]int{demo.SkillOutletList: 1}}, skills.Config{APIKey: key}, wrap)
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
	_, err := env.client.Call(ctx, "beta", demo.SkillOutletList, nil, key) // tool error
	errs = append(errs, err)
	_, err = env.client.Call(ctx, "echo", demo.SkillOutletList, nil, "") // HTTP error echoing the key
	errs = append(errs, err)
	_, err = env.client.Load(ctx, "echo", demo.SkillOutletList)
	errs = append(errs, err)
	_, err = env.client.Call(ctx, "beta/../x", demo.SkillOutletList, nil, "")
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
	env := newTestEnv(t, demo.Config{}, skills.Config{}, wrap)
	ctx := testCtx(t)
	bad := []string{"", "a/b", "../acme", "acme/../beta", "a b", "ac%2Fme", "tenant?x=1", "acme#x", "ümlaut", strings.Repeat("a", 65)}
	for _, tenant := range bad {
		if _, err := env.client.Find(ctx, tenant, "outlets", 1); !errors.Is(err, skills.ErrInvalidTenant) {
			t.Fatalf("Find(%q) err = %v, want ErrInvalidTenant", tenant, err)
		}
		if _, err := env.client.Load(ctx, tenant, demo.SkillOutletList); !errors.Is(err, skills.ErrInvalidTenant) {
			t.Fatalf("Load(%q) err = %v, want ErrInvalidTenant", tenant, err)
		}
		if _, err := env.client.Call(ctx, tenant, demo.SkillOutletList, nil, ""); !errors.Is(err, skills.ErrInvalidTenant) {
			t.Fatalf("Call(%q) err = %v, want ErrInvalidTenant", tenant, err)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("%d requests reached the server for invalid tenants", n)
	}
	if _, err := env.client.Find(ctx, strings.Repeat("a", 64), "outlets", 1); err != nil {
		t.Fatalf("64-char tenant: %v", err)
	}

}

// TestLoadReusesManifests: an executor loads its step's skills on every
// turn; within ToolsTTL the second load sends nothing, and a different
// tenant or API key is loaded on its own.
func TestLoadReusesManifests(t *testing.T) {
	var mu sync.Mutex
	requests := 0
	env := newTestEnv(t, demo.Config{}, skills.Config{}, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			requests++
			mu.Unlock()
			next.ServeHTTP(w, r)
		})
	})
	count := func() int { mu.Lock(); defer mu.Unlock(); return requests }
	ctx := testCtx(t)
	first, err := env.client.Load(ctx, "beta", demo.SkillOutletList)
	if err != nil {
		t.Fatal(err)
	}
	before := count()
	again, err := env.client.Load(ctx, "beta", demo.SkillOutletList)
	if err != nil || again.Name != first.Name || string(again.OutputSchema) != string(first.OutputSchema) {
		t.Fatalf("second load = %+v, %v", again, err)
	}
	if n := count() - before; n != 0 {
		t.Fatalf("second load sent %d requests, want 0", n)
	}
	if _, err := env.client.Load(ctx, "acme", demo.SkillOutletList); err != nil {
		t.Fatal(err)
	}
	if count() == before {
		t.Fatal("another tenant's load was answered from beta's cache")
	}
	before = count()
	if _, err := env.client.Load(skills.WithAPIKey(ctx, "other-key"), "beta", demo.SkillOutletList); err != nil {
		t.Fatal(err)
	}
	if count() == before {
		t.Fatal("a load with another API key was answered from the cache")
	}
}
