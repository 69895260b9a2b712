package skills_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/skills/demo"
)

// refused fails the test unless err is a permission denial, and only
// that, without any of keys in its text.
func refused(t *testing.T, what string, err error, want string, keys ...string) {
	t.Helper()
	if !errors.Is(err, skills.ErrPermissionDenied) || errors.Is(err, skills.ErrSkillFailed) {
		t.Fatalf("%s: err = %v, want ErrPermissionDenied only", what, err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("%s: err = %v, want it to mention %q", what, err, want)
	}
	for _, key := range keys {
		if strings.Contains(err.Error(), key) {
			t.Fatalf("%s: error leaks an API key: %v", what, err)
		}
	}
}

// TestPermissionDeniedHTTPStatus: a Skill Service answering HTTP 401 or
// 403, whether to the session set-up or to a call on a live session, over
// streamable HTTP and SSE, yields ErrPermissionDenied, is not retried and
// leaves the session usable.
func TestPermissionDeniedHTTPStatus(t *testing.T) {
	const good, bad = "sk-good-5e1d0c", "sk-bad-77aa19"
	paths := map[string]string{skills.TransportStreamableHTTP: "/tenants/{tenant}/mcp", skills.TransportSSE: "/tenants/{tenant}/sse"}
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		for transport, path := range paths {
			t.Run(transport+"/"+strconv.Itoa(status), func(t *testing.T) {
				var revoked atomic.Bool
				var refusals atomic.Int64
				srv := newDemoServer(t, func(next http.Handler) http.Handler {
					return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						if key := r.Header.Get("X-Api-Key"); key != good || revoked.Load() {
							if r.Method == http.MethodPost {
								// Requests only: the session's standalone
								// GET stream may reconnect meanwhile.
								refusals.Add(1)
							}
							// The body echoes the key, which must not reach the error.
							http.Error(w, "key "+key+" may not use this service", status)
							return
						}
						next.ServeHTTP(w, r)
					})
				})
				c := newClient(t, skills.Config{Transport: transport, URL: srv.URL + path, APIKey: bad})
				ctx := testCtx(t)
				want := "HTTP " + strconv.Itoa(status)

				_, err := c.Call(ctx, "beta", demo.SkillOutletList, nil, "k1")
				refused(t, "Call with a refused key", err, want, good, bad)
				_, err = c.Find(ctx, "beta", "outlets", 1)
				refused(t, "Find with a refused key", err, want, good, bad)
				_, err = c.Load(ctx, "beta", demo.SkillOutletList)
				refused(t, "Load with a refused key", err, want, good, bad)

				goodCtx := skills.WithAPIKey(ctx, good)
				if _, err := c.Call(goodCtx, "beta", demo.SkillOutletList, nil, "k2"); err != nil {
					t.Fatalf("Call with the accepted key: %v", err)
				}
				// The key is revoked while the session lives: the call is
				// refused once, not retried on a fresh session.
				revoked.Store(true)
				before := refusals.Load()
				_, err = c.Call(goodCtx, "beta", demo.SkillEngagementAnalytics, []byte(`{"outlet_ids":["out-001"]}`), "k3")
				refused(t, "Call with a revoked key", err, want, good, bad)
				if n := refusals.Load() - before; n != 1 {
					t.Fatalf("a refused call sent %d refused requests, want 1 (no retry)", n)
				}
				revoked.Store(false)
				if _, err := c.Call(goodCtx, "beta", demo.SkillOutletList, nil, "k4"); err != nil {
					t.Fatalf("Call after the refusal: %v", err)
				}
			})
		}
	}
}

// TestPermissionDeniedToolError: a demo skill listed in DenySkills answers
// "permission denied: ...", which the client reports as
// ErrPermissionDenied, not ErrSkillFailed, without retrying or executing
// it; other tool errors stay ErrSkillFailed.
func TestPermissionDeniedToolError(t *testing.T) {
	const key = "sk-tenant-3c9f"
	paths := map[string]string{skills.TransportStreamableHTTP: "/tenants/{tenant}/mcp", skills.TransportSSE: "/tenants/{tenant}/sse"}
	for transport, path := range paths {
		t.Run(transport, func(t *testing.T) {
			svc := demo.NewService(demo.Config{
				DenySkills: []string{demo.SkillOutletList, demo.SkillAcmeLoyaltyReport},
				FailFirst:  map[string]int{demo.SkillEngagementAnalytics: 1},
			})
			srv := httptest.NewServer(svc.Handler())
			t.Cleanup(srv.Close)
			c := newClient(t, skills.Config{Transport: transport, URL: srv.URL + path, APIKey: key})
			ctx := testCtx(t)

			_, err := c.Call(ctx, "beta", demo.SkillOutletList, nil, "deny-1")
			refused(t, "denied skill", err, "permission denied: "+demo.SkillOutletList, key)
			if n := svc.Calls(demo.SkillOutletList); n != 1 {
				t.Fatalf("denied skill was called %d times, want 1 (no retry)", n)
			}
			if n := svc.Invocations()["deny-1"]; n != 0 {
				t.Fatalf("denied call executed %d times", n)
			}
			// The manifest stays loadable: the refusal is of the call.
			if _, err := c.Load(ctx, "beta", demo.SkillOutletList); err != nil {
				t.Fatal(err)
			}
			// A private skill stays unknown to other tenants; its owner is refused.
			if _, err := c.Call(ctx, "beta", demo.SkillAcmeLoyaltyReport, nil, ""); !errors.Is(err, skills.ErrSkillNotFound) {
				t.Fatalf("beta calling acme's skill: err = %v, want ErrSkillNotFound", err)
			}
			_, err = c.Call(ctx, "acme", demo.SkillAcmeLoyaltyReport, nil, "")
			refused(t, "acme's denied skill", err, "permission denied", key)

			args := []byte(`{"outlet_ids":["out-001"]}`)
			_, err = c.Call(ctx, "beta", demo.SkillEngagementAnalytics, args, "")
			if !errors.Is(err, skills.ErrSkillFailed) || errors.Is(err, skills.ErrPermissionDenied) {
				t.Fatalf("injected failure err = %v, want ErrSkillFailed only", err)
			}
			if _, err := c.Call(ctx, "beta", demo.SkillEngagementAnalytics, args, ""); err != nil {
				t.Fatal(err)
			}
		})
	}
}
