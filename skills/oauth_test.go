package skills_test

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/agentbus/agentbus/egress"
	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/skills/oauthtest"
)

// local allows the tests' authorization servers, on loopback.
var local = egress.MustNew("127.0.0.1")

const (
	testClientID     = "agentbus-client"
	testClientSecret = "s3cr3t-do-not-log"
)

// A Skill Service that requires OAuth client credentials: the first call
// discovers the authorization server from the 401's metadata and gets a
// token (client_secret_basic, for the resource and the challenge's
// scope); calls reuse it; one that expires is fetched again before the
// next call; a token the server stops accepting is replaced once on its
// 401. A wrong secret fails with ErrOAuth, and the error shows neither
// the secret nor the Basic credentials.
func TestOAuth_ClientCredentialsTokenFetchedReusedRefreshed(t *testing.T) {
	now, advance := testClock()
	as := oauthtest.Start(t, &oauthtest.Server{ClientID: testClientID, ClientSecret: testClientSecret, Life: time.Hour, Now: now,
		Scopes: []string{"skills:call"}}, whoami())
	url := as.ResourceURL + "/mcp"
	c := newClient(t, skills.Config{URL: url, Mode: skills.ModePlain, Egress: local,
		OAuth: &skills.ClientCredentials{ClientID: testClientID, ClientSecret: testClientSecret}})
	skills.SetOAuthClock(c, now)
	ctx := context.Background()
	call := func() {
		t.Helper()
		if out, err := c.Call(ctx, "t1", "whoami", nil, ""); err != nil || !strings.Contains(string(out), "ok") {
			t.Fatalf("call: %s, %v", out, err)
		}
	}

	call()
	call()
	if g, scopes := as.Grants(), as.AskedScopes(); g != 1 || scopes[0] != "skills:call" {
		t.Fatalf("%d grants (scopes %v), want one for the challenge's scope", g, scopes)
	}
	advance(59 * time.Minute) // a minute before expiry: outside the 30 s margin
	call()
	if g := as.Grants(); g != 1 {
		t.Fatalf("a token a minute from expiry was replaced (%d grants)", g)
	}
	advance(45 * time.Second) // 15 s before expiry: inside the margin
	call()
	if g := as.Grants(); g != 2 || as.ExpiredRefusals() != 0 {
		t.Fatalf("%d grants, %d refusals; want the expiring token replaced before the call", g, as.ExpiredRefusals())
	}
	as.Revoke("tok-2")
	call()
	if g := as.Grants(); g != 3 {
		t.Fatalf("%d grants, want the refused token replaced on its 401", g)
	}

	bad := newClient(t, skills.Config{URL: url, Mode: skills.ModePlain, Egress: local,
		OAuth: &skills.ClientCredentials{ClientID: testClientID, ClientSecret: "wrong-" + testClientSecret}})
	_, err := bad.Call(ctx, "t1", "whoami", nil, "")
	if !errors.Is(err, skills.ErrOAuth) || strings.Contains(err.Error(), testClientSecret) ||
		strings.Contains(err.Error(), base64.StdEncoding.EncodeToString([]byte(testClientID+":wrong-"+testClientSecret))) {
		t.Fatalf("wrong secret: %v", err)
	}
}

// Each tenant authenticates with its own credentials ("*" for the
// others); a tenant with none is refused as the server refuses it.
func TestOAuth_CredentialsPerTenant(t *testing.T) {
	as := oauthtest.Start(t, &oauthtest.Server{Life: time.Hour, Clients: map[string]string{"acme-client": "acme-secret", "shared-client": "shared-secret"}},
		whoami())
	cfg := skills.Config{URL: as.ResourceURL + "/tenants/{tenant}/mcp", Mode: skills.ModePlain, Egress: local, OAuthByTenant: map[string]*skills.ClientCredentials{
		"acme": {ClientID: "acme-client", ClientSecret: "acme-secret"},
		"*":    {ClientID: "shared-client", ClientSecret: "shared-secret"},
	}}
	c := newClient(t, cfg)
	ctx := context.Background()
	for _, tenant := range []string{"acme", "beta", "gamma"} {
		if _, err := c.Call(ctx, tenant, "whoami", nil, ""); err != nil {
			t.Fatalf("%s: %v", tenant, err)
		}
	}
	if a, sh := as.GrantsTo("acme-client"), as.GrantsTo("shared-client"); a != 1 || sh != 2 {
		t.Fatalf("grants: acme-client %d, shared-client %d; want acme's own and one per other tenant's resource", a, sh)
	}
	delete(cfg.OAuthByTenant, "*")
	only := newClient(t, cfg)
	if _, err := only.Call(ctx, "beta", "whoami", nil, ""); !errors.Is(err, skills.ErrPermissionDenied) {
		t.Fatalf("a tenant without credentials: %v, want the server's refusal", err)
	}
}

// A Skill Service behind an authorization server that grants only
// authorization codes: the client with no id registers itself once, the
// user's agent (the Authorizer) is sent to the authorization URL with a
// PKCE S256 challenge and the resource, and the code is exchanged with
// its verifier. A token about to expire is renewed with its refresh
// token, without the user. A redirect whose state is not the request's
// is refused, and the error shows neither the code nor the state.
func TestOAuth_AuthorizationCodeRegistersAuthorizesAndRefreshes(t *testing.T) {
	now, advance := testClock()
	as := oauthtest.Start(t, &oauthtest.Server{AuthorizationCode: true, Life: time.Hour, Now: now},
		whoami())
	var visited []string
	consent := func(ctx context.Context, authURL string) (string, error) {
		visited = append(visited, authURL)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			return "", err
		}
		resp.Body.Close()
		return resp.Header.Get("Location"), nil
	}
	c := newClient(t, skills.Config{URL: as.ResourceURL + "/mcp", Mode: skills.ModePlain, Egress: local, OAuth: &skills.ClientCredentials{},
		OAuthAuthorizer: consent, OAuthRedirectURI: "http://127.0.0.1:1/callback"})
	skills.SetOAuthClock(c, now)
	ctx := context.Background()
	for range 2 {
		if out, err := c.Call(ctx, "t1", "whoami", nil, ""); err != nil || !strings.Contains(string(out), "ok") {
			t.Fatalf("call: %s, %v", out, err)
		}
	}
	if r, a, g := as.Registrations(), as.Authorizations(), as.Grants(); r != 1 || a != 1 || g != 1 {
		t.Fatalf("registrations %d, authorizations %d, grants %d; want one each", r, a, g)
	}
	u, err := url.Parse(visited[0])
	if err != nil {
		t.Fatal(err)
	}
	if q := u.Query(); q.Get("resource") != as.ResourceURL+"/mcp" || q.Get("code_challenge_method") != "S256" || q.Get("client_id") != "public-1" {
		t.Fatalf("authorization request %s", u.RawQuery)
	}
	advance(59*time.Minute + 45*time.Second) // inside the renewal margin
	if _, err := c.Call(ctx, "t1", "whoami", nil, ""); err != nil {
		t.Fatal(err)
	}
	if a, rf := as.Authorizations(), as.Refreshes(); a != 1 || rf != 1 || as.ExpiredRefusals() != 0 {
		t.Fatalf("authorizations %d, refreshes %d, refusals %d; want the token refreshed without the user", a, rf, as.ExpiredRefusals())
	}

	forged := newClient(t, skills.Config{URL: as.ResourceURL + "/mcp", Mode: skills.ModePlain, Egress: local, OAuth: &skills.ClientCredentials{},
		OAuthRedirectURI: "http://127.0.0.1:1/callback", OAuthAuthorizer: func(ctx context.Context, authURL string) (string, error) {
			back, err := consent(ctx, authURL)
			return strings.Replace(back, "state=", "state=forged", 1), err
		}})
	_, err = forged.Call(ctx, "t1", "whoami", nil, "")
	if !errors.Is(err, skills.ErrOAuth) || !strings.Contains(err.Error(), "state") || strings.Contains(err.Error(), "code-") {
		t.Fatalf("forged state: %v", err)
	}
}

// The authorization server a Skill Service names is held to the egress
// policy, the Skill Service's own origin (configured by the operator) is
// not: without the authorization server's address allow-listed the call
// fails with ErrOAuth and egress_denied, and the authorization server
// accepts no connection.
func TestOAuth_EgressPolicyHoldsTheAuthorizationServer(t *testing.T) {
	as := oauthtest.Start(t, &oauthtest.Server{ClientID: testClientID, ClientSecret: testClientSecret, Life: time.Hour}, whoami())
	c := newClient(t, skills.Config{URL: as.ResourceURL + "/mcp", Mode: skills.ModePlain,
		OAuth: &skills.ClientCredentials{ClientID: testClientID, ClientSecret: testClientSecret}})
	_, err := c.Call(context.Background(), "t1", "whoami", nil, "")
	if !errors.Is(err, skills.ErrOAuth) || !errors.Is(err, egress.ErrDenied) || !strings.Contains(err.Error(), "egress_denied") {
		t.Fatalf("call: %v", err)
	}
	if n := as.AuthConnections(); n != 0 || as.Grants() != 0 {
		t.Fatalf("the refused authorization server accepted %d connections", n)
	}
}

// whoami is an MCP server over streamable HTTP whose whoami tool answers
// "ok": the resource the tests' authorization server protects.
func whoami() http.Handler {
	s := server.NewMCPServer("protected", "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("whoami", mcp.WithDescription("Say who called")), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	})
	return server.NewStreamableHTTPServer(s, server.WithStreamableHTTPLogger(slog.New(slog.DiscardHandler)))
}

// testClock is a clock that moves only when advanced.
func testClock() (now func() time.Time, advance func(time.Duration)) {
	var mu sync.Mutex
	clock := time.Now()
	return func() time.Time { mu.Lock(); defer mu.Unlock(); return clock },
		func(d time.Duration) { mu.Lock(); defer mu.Unlock(); clock = clock.Add(d) }
}
