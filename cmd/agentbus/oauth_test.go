package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills/demo"
)

const (
	oauthClientID     = "agentbus-prod"
	oauthClientSecret = "cc-secret-7f3a91d2-never-logged"
)

// TestOAuth_ARunThroughASkillServiceThatRequiresClientCredentials: the
// demo Skill Service behind an OAuth resource server whose tokens live 2 s.
// The planner and the executor each get a token with the client
// credentials (discovered from the 401's metadata), the run completes; a
// second run after the tokens expired gets new ones before calling, so no
// call is refused for an expired token. The secret appears in no log.
func TestOAuth_ARunThroughASkillServiceThatRequiresClientCredentials(t *testing.T) {
	var mu sync.Mutex
	issued := map[string]time.Time{}
	grants, expiredRefusals := 0, 0
	var as, rs *httptest.Server
	amux := http.NewServeMux()
	amux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": as.URL, "token_endpoint": as.URL + "/token",
			"grant_types_supported": []string{"client_credentials"}, "token_endpoint_auth_methods_supported": []string{"client_secret_basic"}})
	})
	amux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		id, secret, ok := r.BasicAuth()
		if !ok || id != oauthClientID || secret != oauthClientSecret {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		mu.Lock()
		grants++
		tok := fmt.Sprintf("at-%d", grants)
		issued[tok] = time.Now().Add(2 * time.Second)
		mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 2})
	})
	as = httptest.NewServer(amux)
	t.Cleanup(as.Close)

	skills := demo.NewService(demo.Config{}).Handler()
	rs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/.well-known/oauth-protected-resource") {
			_ = json.NewEncoder(w).Encode(map[string]any{"resource": rs.URL + strings.TrimPrefix(r.URL.Path, "/.well-known/oauth-protected-resource"),
				"authorization_servers": []string{as.URL}})
			return
		}
		tok, bearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		mu.Lock()
		exp, known := issued[tok]
		valid := known && time.Now().Before(exp)
		if bearer && known && !valid {
			expiredRefusals++
		}
		mu.Unlock()
		if !valid {
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+rs.URL+`/.well-known/oauth-protected-resource`+r.URL.Path+`"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		skills.ServeHTTP(w, r)
	}))
	t.Cleanup(rs.Close)

	c := newCluster(t, demo.Config{}, "SKILL_SERVICE_URL="+rs.URL+"/tenants/{tenant}/mcp",
		"SKILL_OAUTH_CLIENT_ID="+oauthClientID, "SKILL_OAUTH_CLIENT_SECRET="+oauthClientSecret)
	procs := c.startAll(1)
	for i := range 2 {
		if i == 1 {
			time.Sleep(2500 * time.Millisecond) // every token has expired
		}
		res := postRun(t, c.ingURL, orch.RunRequest{TenantID: "demo", UserID: "u", SessionID: fmt.Sprintf("s-oauth-%d", i), Message: demoTask})
		if res.TerminalCode != orch.CodeSuccess {
			t.Fatalf("run %d ended %s: %s", i, res.TerminalCode, res.Response)
		}
	}
	mu.Lock()
	g, refused := grants, expiredRefusals
	mu.Unlock()
	if g < 3 || refused != 0 {
		t.Errorf("%d token grants, %d calls refused for an expired token; want the planner's and the executor's first tokens and new ones before the second run's calls", g, refused)
	}
	for name, p := range procs {
		if strings.Contains(p.logs.String(), oauthClientSecret) {
			t.Errorf("the %s log holds the client secret", name)
		}
	}
}
