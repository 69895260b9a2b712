package skills

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// authServer is an OAuth authorization server that grants client
// credentials (client_secret_basic) with tokens of a given lifetime, and
// the MCP server it protects.
type authServer struct {
	mu      sync.Mutex
	now     func() time.Time
	life    time.Duration
	issued  map[string]time.Time // token -> expiry
	grants  int
	revoked map[string]bool
	scopes  []string
}

const (
	testClientID     = "agentbus-client"
	testClientSecret = "s3cr3t-do-not-log"
)

func (a *authServer) start(t *testing.T) (mcpURL string) {
	t.Helper()
	var as, rs *httptest.Server
	amux := http.NewServeMux()
	amux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": as.URL, "token_endpoint": as.URL + "/token",
			"grant_types_supported": []string{"client_credentials"}, "token_endpoint_auth_methods_supported": []string{"client_secret_basic"}})
	})
	amux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		id, secret, ok := r.BasicAuth()
		if !ok || id != testClientID || secret != testClientSecret || r.Form.Get("grant_type") != "client_credentials" ||
			r.Form.Get("resource") != rs.URL+"/mcp" {
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client"})
			return
		}
		a.mu.Lock()
		a.grants++
		tok := fmt.Sprintf("tok-%d", a.grants)
		a.issued[tok] = a.now().Add(a.life)
		a.scopes = append(a.scopes, r.Form.Get("scope"))
		a.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": int(a.life.Seconds())})
	})
	as = httptest.NewServer(amux)
	t.Cleanup(as.Close)

	s := server.NewMCPServer("protected", "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("whoami", mcp.WithDescription("Say who called")), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	})
	mcpHandler := server.NewStreamableHTTPServer(s, server.WithStreamableHTTPLogger(slog.New(slog.DiscardHandler)))
	rmux := http.NewServeMux()
	rmux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"resource": rs.URL + "/mcp", "authorization_servers": []string{as.URL},
			"scopes_supported": []string{"skills:call"}})
	})
	rmux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		a.mu.Lock()
		exp, known := a.issued[tok]
		valid := known && !a.revoked[tok] && a.now().Before(exp)
		a.mu.Unlock()
		if !valid {
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+rs.URL+`/.well-known/oauth-protected-resource/mcp", scope="skills:call"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	rs = httptest.NewServer(rmux)
	t.Cleanup(rs.Close)
	return rs.URL + "/mcp"
}

// A Skill Service that requires OAuth client credentials: the first call
// discovers the authorization server from the 401's metadata and gets a
// token (client_secret_basic, for the resource and the challenge's
// scope); calls reuse it; one that expires is fetched again before the
// next call; a token the server stops accepting is replaced once on its
// 401. A wrong secret fails with ErrOAuth, and the error shows neither
// the secret nor the Basic credentials.
func TestOAuth_ClientCredentialsTokenFetchedReusedRefreshed(t *testing.T) {
	var mu sync.Mutex
	clock := time.Now()
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	a := &authServer{now: now, life: time.Hour, issued: map[string]time.Time{}, revoked: map[string]bool{}}
	url := a.start(t)
	c, err := NewClient(Config{URL: url, Mode: ModePlain, OAuth: &ClientCredentials{ClientID: testClientID, ClientSecret: testClientSecret}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	c.httpClient.Transport.(refusalTransport).base.(*oauthTransport).now = now
	ctx := context.Background()
	call := func() {
		t.Helper()
		if out, err := c.Call(ctx, "t1", "whoami", nil, ""); err != nil || !strings.Contains(string(out), "ok") {
			t.Fatalf("call: %s, %v", out, err)
		}
	}
	grants := func() int { a.mu.Lock(); defer a.mu.Unlock(); return a.grants }

	call()
	call()
	if g := grants(); g != 1 || a.scopes[0] != "skills:call" {
		t.Fatalf("%d grants (scopes %v), want one for the challenge's scope", g, a.scopes)
	}
	mu.Lock()
	clock = clock.Add(59 * time.Minute) // a minute before expiry: outside the 30 s margin
	mu.Unlock()
	call()
	if g := grants(); g != 1 {
		t.Fatalf("a token a minute from expiry was replaced (%d grants)", g)
	}
	mu.Lock()
	clock = clock.Add(45 * time.Second) // 15 s before expiry: inside the 30 s margin
	mu.Unlock()
	call()
	if g := grants(); g != 2 {
		t.Fatalf("%d grants, want the expiring token replaced before the call", g)
	}
	a.mu.Lock()
	a.revoked["tok-2"] = true
	a.mu.Unlock()
	call()
	if g := grants(); g != 3 {
		t.Fatalf("%d grants, want the refused token replaced on its 401", g)
	}

	bad, err := NewClient(Config{URL: url, Mode: ModePlain, OAuth: &ClientCredentials{ClientID: testClientID, ClientSecret: "wrong-" + testClientSecret}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bad.Close() })
	_, err = bad.Call(ctx, "t1", "whoami", nil, "")
	if !errors.Is(err, ErrOAuth) || strings.Contains(err.Error(), testClientSecret) ||
		strings.Contains(err.Error(), base64.StdEncoding.EncodeToString([]byte(testClientID+":wrong-"+testClientSecret))) {
		t.Fatalf("wrong secret: %v", err)
	}
}
