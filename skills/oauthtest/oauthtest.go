// Package oauthtest runs, for tests, an OAuth authorization server that
// grants client credentials (client_secret_basic) and a resource server
// that puts an MCP handler behind its bearer tokens, with the metadata
// MCP authorization discovers them by.
package oauthtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Server is the pair. Its tokens live Life; Now is its clock.
type Server struct {
	ClientID, ClientSecret string
	// Clients are more clients, by id: their secrets.
	Clients map[string]string
	Life    time.Duration
	Now     func() time.Time
	// Scopes, when set, are named in the resource's challenge.
	Scopes []string

	// AuthURL is the authorization server (its issuer); ResourceURL the
	// resource server, in front of the MCP handler.
	AuthURL, ResourceURL string

	mu      sync.Mutex
	issued  map[string]time.Time
	revoked map[string]bool
	grants  int
	byID    map[string]int
	expired int
	asked   []string
}

// Start serves s in front of mcp until the test ends.
func Start(t testing.TB, s *Server, mcp http.Handler) *Server {
	t.Helper()
	if s.Now == nil {
		s.Now = time.Now
	}
	s.issued, s.revoked, s.byID = map[string]time.Time{}, map[string]bool{}, map[string]int{}
	as := httptest.NewServer(http.HandlerFunc(s.authorize))
	t.Cleanup(as.Close)
	s.AuthURL = as.URL
	rs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.protect(w, r, mcp) }))
	t.Cleanup(rs.Close)
	s.ResourceURL = rs.URL
	return s
}

func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/.well-known/oauth-authorization-server":
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": s.AuthURL, "token_endpoint": s.AuthURL + "/token",
			"grant_types_supported": []string{"client_credentials"}, "token_endpoint_auth_methods_supported": []string{"client_secret_basic"}})
	case r.Method == http.MethodPost && r.URL.Path == "/token":
		_ = r.ParseForm()
		id, secret, ok := r.BasicAuth()
		known := id == s.ClientID && secret == s.ClientSecret || s.Clients[id] != "" && s.Clients[id] == secret
		if !ok || !known || r.Form.Get("grant_type") != "client_credentials" ||
			!strings.HasPrefix(r.Form.Get("resource"), s.ResourceURL) {
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client"})
			return
		}
		s.mu.Lock()
		s.grants++
		s.byID[id]++
		tok := fmt.Sprintf("tok-%d", s.grants)
		s.issued[tok] = s.Now().Add(s.Life)
		s.asked = append(s.asked, r.Form.Get("scope"))
		s.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": int(s.Life.Seconds())})
	default:
		http.NotFound(w, r)
	}
}

func (s *Server) protect(w http.ResponseWriter, r *http.Request, mcp http.Handler) {
	if path, ok := strings.CutPrefix(r.URL.Path, "/.well-known/oauth-protected-resource"); ok {
		_ = json.NewEncoder(w).Encode(map[string]any{"resource": s.ResourceURL + path, "authorization_servers": []string{s.AuthURL}})
		return
	}
	tok, bearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	exp, known := s.issued[tok]
	valid := known && !s.revoked[tok] && s.Now().Before(exp)
	if bearer && known && !s.revoked[tok] && !valid {
		s.expired++
	}
	s.mu.Unlock()
	if !valid {
		challenge := `Bearer resource_metadata="` + s.ResourceURL + `/.well-known/oauth-protected-resource` + r.URL.Path + `"`
		if len(s.Scopes) > 0 {
			challenge += `, scope="` + strings.Join(s.Scopes, " ") + `"`
		}
		w.Header().Set("WWW-Authenticate", challenge)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	mcp.ServeHTTP(w, r)
}

// Grants counts the tokens granted.
func (s *Server) Grants() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.grants
}

// GrantsTo counts the tokens granted to client id.
func (s *Server) GrantsTo(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byID[id]
}

// ExpiredRefusals counts the requests refused for a token that had
// expired.
func (s *Server) ExpiredRefusals() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.expired
}

// AskedScopes are the scopes of each token request, in order.
func (s *Server) AskedScopes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.asked...)
}

// Revoke makes the resource server refuse tok.
func (s *Server) Revoke(tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revoked[tok] = true
}
