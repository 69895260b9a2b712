// Package oauthtest runs, for tests, an OAuth authorization server that
// grants client credentials (client_secret_basic) or, with
// AuthorizationCode, authorization codes (PKCE S256, dynamic registration
// of public clients, refresh tokens), and a resource server
// that puts an MCP handler behind its bearer tokens, with the metadata
// MCP authorization discovers them by.
package oauthtest

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/egress/egresstest"
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
	// AuthorizationCode makes the server grant authorization codes, to
	// clients it registers, instead of client credentials.
	AuthorizationCode bool

	// AuthURL is the authorization server (its issuer); ResourceURL the
	// resource server, in front of the MCP handler.
	AuthURL, ResourceURL string

	as *egresstest.Server

	mu      sync.Mutex
	issued  map[string]time.Time
	revoked map[string]bool
	grants  int
	byID    map[string]int
	expired int
	asked   []string

	registered map[string]bool   // client ids it registered
	codes      map[string]string // code: its PKCE challenge
	refresh    map[string]bool   // refresh tokens it issued
	authorized int
	refreshes  int
	registers  int
}

// Start serves s in front of mcp until the test ends.
func Start(t testing.TB, s *Server, mcp http.Handler) *Server {
	t.Helper()
	if s.Now == nil {
		s.Now = time.Now
	}
	s.issued, s.revoked, s.byID = map[string]time.Time{}, map[string]bool{}, map[string]int{}
	s.registered, s.codes, s.refresh = map[string]bool{}, map[string]string{}, map[string]bool{}
	s.as = egresstest.NewServer(t, http.HandlerFunc(s.authorize))
	s.AuthURL = s.as.URL
	rs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.protect(w, r, mcp) }))
	t.Cleanup(rs.Close)
	s.ResourceURL = rs.URL
	return s
}

// AuthConnections is how many connections the authorization server has
// accepted.
func (s *Server) AuthConnections() int64 { return s.as.Accepted() }

func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/.well-known/oauth-authorization-server" && s.AuthorizationCode:
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": s.AuthURL, "token_endpoint": s.AuthURL + "/token",
			"authorization_endpoint": s.AuthURL + "/authorize", "registration_endpoint": s.AuthURL + "/register",
			"grant_types_supported": []string{"authorization_code", "refresh_token"}, "code_challenge_methods_supported": []string{"S256"},
			"token_endpoint_auth_methods_supported": []string{"none"}})
	case r.Method == http.MethodGet && r.URL.Path == "/.well-known/oauth-authorization-server":
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": s.AuthURL, "token_endpoint": s.AuthURL + "/token",
			"grant_types_supported": []string{"client_credentials"}, "token_endpoint_auth_methods_supported": []string{"client_secret_basic"}})
	case r.Method == http.MethodPost && r.URL.Path == "/register" && s.AuthorizationCode:
		s.mu.Lock()
		s.registers++
		id := fmt.Sprintf("public-%d", s.registers)
		s.registered[id] = true
		s.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"client_id": id, "token_endpoint_auth_method": "none"})
	case r.Method == http.MethodGet && r.URL.Path == "/authorize" && s.AuthorizationCode:
		q := r.URL.Query()
		back, err := url.Parse(q.Get("redirect_uri"))
		s.mu.Lock()
		ok := err == nil && s.registered[q.Get("client_id")] && q.Get("code_challenge_method") == "S256" && q.Get("code_challenge") != ""
		code := ""
		if ok {
			s.authorized++
			code = fmt.Sprintf("code-%d", s.authorized)
			s.codes[code] = q.Get("code_challenge")
		}
		s.mu.Unlock()
		if !ok {
			http.Error(w, "bad authorization request", http.StatusBadRequest)
			return
		}
		v := back.Query()
		v.Set("code", code)
		v.Set("state", q.Get("state"))
		back.RawQuery = v.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
	case r.Method == http.MethodPost && r.URL.Path == "/token" && s.AuthorizationCode:
		_ = r.ParseForm()
		f := r.Form
		s.mu.Lock()
		var ok bool
		switch f.Get("grant_type") {
		case "authorization_code":
			sum := sha256.Sum256([]byte(f.Get("code_verifier")))
			challenge, known := s.codes[f.Get("code")]
			delete(s.codes, f.Get("code")) // a code is used once
			ok = known && challenge == base64.RawURLEncoding.EncodeToString(sum[:])
		case "refresh_token":
			ok = s.refresh[f.Get("refresh_token")]
			delete(s.refresh, f.Get("refresh_token")) // rotated
			if ok {
				s.refreshes++
			}
		}
		ok = ok && s.registered[f.Get("client_id")] && strings.HasPrefix(f.Get("resource"), s.ResourceURL)
		if !ok {
			s.mu.Unlock()
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant"})
			return
		}
		s.grants++
		tok, rt := fmt.Sprintf("tok-%d", s.grants), fmt.Sprintf("refresh-%d", s.grants)
		s.issued[tok] = s.Now().Add(s.Life)
		s.refresh[rt] = true
		s.asked = append(s.asked, f.Get("scope"))
		s.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": int(s.Life.Seconds()),
			"refresh_token": rt})
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

// Registrations, Authorizations and Refreshes count the clients the
// server registered, the codes it issued and the refresh tokens it
// exchanged.
func (s *Server) Registrations() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.registers
}

func (s *Server) Authorizations() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.authorized
}

func (s *Server) Refreshes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refreshes
}

// Revoke makes the resource server refuse tok.
func (s *Server) Revoke(tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revoked[tok] = true
}
