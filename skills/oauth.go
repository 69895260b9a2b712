package skills

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	json "github.com/go-json-experiment/json/v1"
)

// OAuth to Skill Services (MCP authorization, 2025-11-25, with the
// client-credentials extension, SEP-1046). A Skill Service that answers a
// call 401 names its protected-resource metadata in WWW-Authenticate (or
// it is at the well-known URL); that names the authorization server, whose
// metadata names its endpoints. A server of the 2025-03-26 revision has no
// resource metadata: its own origin is the authorization server, with
// metadata at the root or, lacking that, the default endpoints.
//
// Two grants get a token, for the resource and the scope the challenge
// (else the resource's metadata, else the credentials) names:
//   - client_credentials, when the client has a secret or a key and the
//     server grants it, authenticating with client_secret_basic
//     (client_secret_post when the server takes only that) or a
//     private_key_jwt assertion;
//   - authorization_code with PKCE (S256), when the client has an
//     Authorizer, the user's agent: it takes the authorization URL to the
//     user and returns where the server redirected. The client is
//     identified by its pre-registered id, else its metadata document's URL
//     (CIMD) where the server takes those, else by dynamic registration
//     (RFC 7591), kept per tenant and authorization server.
//
// The token is kept per tenant and resource until shortly before it
// expires, then renewed from the endpoint it came from (with its refresh
// token when it has one). A 401 with a kept token, or a 403 naming an
// insufficient scope (step-up: the scopes are then the old ones and the
// challenge's), starts the flow again; a request authorizes at most twice,
// then gets the server's answer. Secrets, codes, assertions and tokens
// never appear in an error.

// ClientCredentials are a client's OAuth identity. For the
// client_credentials grant, ClientID and exactly one of ClientSecret and
// PrivateKeyPEM are set. For the authorization_code grant (a client with
// an Authorizer) all are optional: a public client with no id registers
// itself, or names its ClientMetadataURL.
type ClientCredentials struct {
	ClientID string
	// ClientSecret authenticates the client with client_secret_basic (or
	// client_secret_post).
	ClientSecret string
	// PrivateKeyPEM (PKCS #8, SEC 1 or PKCS #1) signs a private_key_jwt
	// client assertion instead; Algorithm is ES256 (the default for an EC
	// key) or RS256 (for an RSA key).
	PrivateKeyPEM []byte
	Algorithm     string
	// Scopes are asked for when neither the challenge nor the resource's
	// metadata names any.
	Scopes []string
	// ClientMetadataURL is the HTTPS URL of the client's metadata
	// document: its client id at an authorization server that takes
	// client id metadata documents, instead of registering.
	ClientMetadataURL string
}

// confidential reports whether c holds a secret or a key of its own.
func (c *ClientCredentials) confidential() bool {
	return c.ClientSecret != "" || len(c.PrivateKeyPEM) > 0
}

// Authorizer plays the user's agent in the authorization_code grant: it
// takes the user to authURL and returns the URL the authorization server
// redirected them to (the redirect URI with the code and the state).
type Authorizer func(ctx context.Context, authURL string) (callbackURL string, err error)

// ErrOAuth reports a failed OAuth discovery or token request.
var ErrOAuth = errors.New("skills: oauth")

// tokenMargin is how long before its expiry a token is fetched again (a
// quarter of its lifetime for a shorter-lived one).
const tokenMargin = 30 * time.Second

// maxAuthorizations bounds the authorizations one request may start: the
// first on a 401, one step-up on a 403 (insufficient scope).
const maxAuthorizations = 2

// oauthTransport adds the bearer token of the request's tenant's
// ClientCredentials to every request, fetching it when the server asks
// (401, or 403 for more scope). A tenant without credentials is sent as
// is. The requests of discovery, registration and tokens go through base
// when they are for the resource's own origin (the operator configured
// it) and through remote, dialled through the egress policy, when the
// server named another (its metadata, its authorization server's).
type oauthTransport struct {
	base        http.RoundTripper
	remote      http.RoundTripper
	creds       func(tenant string) *ClientCredentials
	authorize   Authorizer
	redirectURI string
	now         func() time.Time

	mu      sync.Mutex
	tokens  map[string]*bearer       // by tenant and resource (scheme, host, path)
	flows   map[string]*sync.Mutex   // one authorization at a time per token key
	clients map[string]*registration // registered clients by tenant and issuer
}

type tenantKey struct{}

// withTenant returns ctx naming the tenant its HTTP requests are made for.
func withTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

func tenantFrom(ctx context.Context) string {
	t, _ := ctx.Value(tenantKey{}).(string)
	return t
}

// credentialsFor returns the credentials of tenant in byTenant, else the
// "*" entry, else def.
func credentialsFor(def *ClientCredentials, byTenant map[string]*ClientCredentials) func(string) *ClientCredentials {
	byTenant = maps.Clone(byTenant) // the caller may change its map later
	return func(tenant string) *ClientCredentials {
		if c := byTenant[tenant]; c != nil {
			return c
		}
		if c := byTenant["*"]; c != nil {
			return c
		}
		return def
	}
}

type bearer struct {
	token   string
	refresh string        // refresh token, when the server gave one
	scope   string        // the scope it was asked for
	expires time.Time     // zero: no expiry given
	margin  time.Duration // fetched again this long before it expires
	from    grantTarget   // where it came from: its renewal is asked there
}

// grantTarget is what discovery found for a resource: where and how to
// ask for its tokens.
type grantTarget struct {
	issuer                                       string
	authorizationEndpoint, tokenEndpoint, regURL string
	audience, resource, scope                    string
	authMethods, signingAlgs, grantTypes         []string
	pkceMethods                                  []string
	cimd                                         bool
	legacy                                       bool   // no metadata at all: the 2025-03-26 default endpoints
	origin                                       string // the resource's scheme://host, which the operator configured
}

// registration is how the client is known to an authorization server.
type registration struct {
	id, secret, method string // method: client_secret_basic, client_secret_post or none
}

func newOAuthTransport(base, remote http.RoundTripper, creds func(string) *ClientCredentials, authorize Authorizer, redirectURI string) *oauthTransport {
	return &oauthTransport{base: base, remote: remote, creds: creds, authorize: authorize, redirectURI: redirectURI, now: time.Now,
		tokens: map[string]*bearer{}, flows: map[string]*sync.Mutex{}, clients: map[string]*registration{}}
}

func resourceKey(u *url.URL) string { return u.Scheme + "://" + u.Host + u.Path }

func originOf(u *url.URL) string { return strings.ToLower(u.Scheme + "://" + u.Host) }

// send sends an out-of-band request (discovery, registration, token) of
// the resource at origin: through base to that origin, through remote
// (the egress policy) anywhere else.
func (t *oauthTransport) send(origin string, req *http.Request) (*http.Response, error) {
	if originOf(req.URL) == origin {
		return t.base.RoundTrip(req)
	}
	return t.remote.RoundTrip(req)
}

// tokenKey keys a token by its tenant and resource.
func tokenKey(tenant string, u *url.URL) string { return tenant + "\x00" + resourceKey(u) }

// token returns the usable token kept under key ("" when none is, or it
// is about to expire) and the last one kept, usable or not.
func (t *oauthTransport) token(key string) (string, *bearer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.tokens[key]
	if b == nil || !b.expires.IsZero() && !t.now().Before(b.expires.Add(-b.margin)) {
		return "", b
	}
	return b.token, b
}

// flow returns the lock of key's authorizations.
func (t *oauthTransport) flow(key string) *sync.Mutex {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.flows[key]
	if m == nil {
		m = &sync.Mutex{}
		t.flows[key] = m
	}
	return m
}

func (t *oauthTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	tenant := tenantFrom(req.Context())
	creds := t.creds(tenant)
	if creds == nil {
		return t.base.RoundTrip(req)
	}
	key := tokenKey(tenant, req.URL)
	tok, last := t.token(key)
	if tok == "" && last != nil && req.Header.Get("Authorization") == "" {
		// A token that expired is renewed before the request, not after
		// a 401, where the last one came from: only when the server has
		// asked before is one known.
		if err := t.renew(req.Context(), creds, tenant, key, tok); err != nil {
			return nil, err
		}
		tok, _ = t.token(key)
	}
	resp, err := t.base.RoundTrip(withBearer(req, tok))
	for n := 0; err == nil && n < maxAuthorizations; n++ {
		challenge := resp.Header.Get("WWW-Authenticate")
		stepUp := resp.StatusCode == http.StatusForbidden && challengeParams(challenge)["error"] == "insufficient_scope"
		if resp.StatusCode != http.StatusUnauthorized && !stepUp || req.Body != nil && req.GetBody == nil {
			return resp, nil // not an authorization problem, or the request cannot be sent again
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		if err := t.authorizeFor(req, creds, tenant, key, tok, challenge, stepUp); err != nil {
			return nil, err
		}
		tok, _ = t.token(key)
		retry := req.Clone(req.Context())
		if req.GetBody != nil {
			if retry.Body, err = req.GetBody(); err != nil {
				return nil, err
			}
		}
		resp, err = t.base.RoundTrip(withBearer(retry, tok))
	}
	return resp, err
}

// renew replaces the expiring token under key from where it came from,
// unless another request already has (sent was its token then).
func (t *oauthTransport) renew(ctx context.Context, creds *ClientCredentials, tenant, key, sent string) error {
	return t.replace(key, sent, func(last *bearer) error { return t.obtain(ctx, creds, tenant, key, last.from, last) })
}

// authorizeFor gets a new token for req's resource after the server
// refused sent (with challenge), unless another request already has.
func (t *oauthTransport) authorizeFor(req *http.Request, creds *ClientCredentials, tenant, key, sent, challenge string, stepUp bool) error {
	return t.replace(key, sent, func(last *bearer) error {
		from, err := t.discover(req.Context(), creds, req.URL, challenge)
		if err != nil {
			return err
		}
		if stepUp && last != nil {
			from.scope = unionScopes(last.scope, from.scope)
		}
		return t.obtain(req.Context(), creds, tenant, key, from, nil)
	})
}

// replace runs fetch, with the last token kept under key, one request at
// a time per key, unless another request has already replaced sent.
func (t *oauthTransport) replace(key, sent string, fetch func(last *bearer) error) error {
	m := t.flow(key)
	m.Lock()
	defer m.Unlock()
	cur, last := t.token(key)
	if cur != "" && cur != sent {
		return nil
	}
	return fetch(last)
}

// coversResource reports whether the resource identifier resource
// names u: the same origin, and a path u's is at or under.
func coversResource(resource string, u *url.URL) bool {
	r, err := url.Parse(resource)
	if err != nil || !strings.EqualFold(r.Scheme, u.Scheme) || !strings.EqualFold(r.Host, u.Host) || r.Fragment != "" {
		return false
	}
	p := strings.TrimSuffix(r.Path, "/")
	return p == "" || u.Path == p || strings.HasPrefix(u.Path, p+"/")
}

func unionScopes(a, b string) string {
	out := strings.Fields(a)
	for _, s := range strings.Fields(b) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return strings.Join(out, " ")
}

func withBearer(req *http.Request, token string) *http.Request {
	if token == "" {
		return req
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+token)
	return r
}

// discover finds the authorization server of the resource at u (from the
// challenge, else the well-known metadata) and its endpoints.
func (t *oauthTransport) discover(ctx context.Context, creds *ClientCredentials, u *url.URL, challenge string) (grantTarget, error) {
	params := challengeParams(challenge)
	prmURLs := []string{}
	if v := params["resource_metadata"]; v != "" {
		prmURLs = append(prmURLs, v)
	}
	origin := originOf(u)
	if p := strings.TrimSuffix(u.Path, "/"); p != "" {
		prmURLs = append(prmURLs, origin+"/.well-known/oauth-protected-resource"+p)
	}
	prmURLs = append(prmURLs, origin+"/.well-known/oauth-protected-resource")
	var prm struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
		ScopesSupported      []string `json:"scopes_supported"`
	}
	legacy := false
	if err := t.firstJSON(ctx, origin, prmURLs, &prm); err != nil {
		if creds.confidential() {
			// A secret or a key goes only to a server the resource's
			// metadata names, never to the resource's own origin by default.
			return grantTarget{}, fmt.Errorf("%w: protected resource metadata of %s: %w", ErrOAuth, resourceKey(u), err)
		}
		legacy, prm.AuthorizationServers = true, []string{origin} // 2025-03-26: the server's origin authorizes
	}
	if len(prm.AuthorizationServers) == 0 {
		return grantTarget{}, fmt.Errorf("%w: the protected resource metadata of %s names no authorization server", ErrOAuth, resourceKey(u))
	}
	if prm.Resource != "" && !coversResource(prm.Resource, u) {
		// Metadata for another resource: a token asked for it would be
		// the other resource's (RFC 9728 §3.3).
		return grantTarget{}, fmt.Errorf("%w: the protected resource metadata of %s is for %s", ErrOAuth, resourceKey(u), prm.Resource)
	}
	issuer, err := url.Parse(prm.AuthorizationServers[0])
	if err != nil || issuer.Host == "" {
		return grantTarget{}, fmt.Errorf("%w: authorization server %q is not a URL", ErrOAuth, prm.AuthorizationServers[0])
	}
	ipath := strings.TrimSuffix(issuer.Path, "/")
	iorigin := issuer.Scheme + "://" + issuer.Host
	var asm struct {
		Issuer                string   `json:"issuer"`
		AuthorizationEndpoint string   `json:"authorization_endpoint"`
		TokenEndpoint         string   `json:"token_endpoint"`
		RegistrationEndpoint  string   `json:"registration_endpoint"`
		AuthMethods           []string `json:"token_endpoint_auth_methods_supported"`
		SigningAlgs           []string `json:"token_endpoint_auth_signing_alg_values_supported"`
		GrantTypes            []string `json:"grant_types_supported"`
		PKCEMethods           []string `json:"code_challenge_methods_supported"`
		CIMD                  bool     `json:"client_id_metadata_document_supported"`
	}
	metaURLs := []string{iorigin + "/.well-known/oauth-authorization-server" + ipath, iorigin + "/.well-known/openid-configuration" + ipath}
	if ipath != "" {
		metaURLs = append(metaURLs, iorigin+ipath+"/.well-known/openid-configuration")
	}
	target := grantTarget{origin: origin}
	if err := t.firstJSON(ctx, origin, metaURLs, &asm); err != nil {
		if !legacy {
			return grantTarget{}, fmt.Errorf("%w: authorization server metadata of %s: %w", ErrOAuth, prm.AuthorizationServers[0], err)
		}
		// 2025-03-26 with no metadata either: the default endpoints.
		asm.Issuer, asm.AuthorizationEndpoint, asm.TokenEndpoint, asm.RegistrationEndpoint = origin, origin+"/authorize", origin+"/token", origin+"/register"
		target.legacy = true
	}
	if asm.TokenEndpoint == "" {
		return grantTarget{}, fmt.Errorf("%w: the authorization server %s names no token endpoint", ErrOAuth, prm.AuthorizationServers[0])
	}
	scopes := prm.ScopesSupported
	if len(scopes) == 0 {
		scopes = creds.Scopes
	}
	target.issuer = cmp.Or(asm.Issuer, prm.AuthorizationServers[0])
	target.authorizationEndpoint, target.tokenEndpoint, target.regURL = asm.AuthorizationEndpoint, asm.TokenEndpoint, asm.RegistrationEndpoint
	target.audience = target.issuer
	target.resource = cmp.Or(prm.Resource, resourceKey(u))
	target.scope = cmp.Or(params["scope"], strings.Join(scopes, " "))
	target.authMethods, target.signingAlgs, target.grantTypes = asm.AuthMethods, asm.SigningAlgs, asm.GrantTypes
	target.pkceMethods, target.cimd = asm.PKCEMethods, asm.CIMD
	return target, nil
}

// obtain gets a token for key from from: with last's refresh token when
// it has one, else with the client_credentials grant when creds can and
// the server grants it, else with the authorization_code grant.
func (t *oauthTransport) obtain(ctx context.Context, creds *ClientCredentials, tenant, key string, from grantTarget, last *bearer) error {
	if last != nil && last.refresh != "" {
		if reg, err := t.clientFor(ctx, creds, tenant, from); err == nil {
			form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {last.refresh}, "resource": {from.resource}}
			if t.tokenRequest(ctx, creds, reg, key, from, form) == nil {
				return nil
			}
		}
		// A refused refresh token: authorize again.
	}
	canClientCredentials := creds.confidential() && creds.ClientID != "" &&
		(slices.Contains(from.grantTypes, "client_credentials") || len(from.grantTypes) == 0 && t.authorize == nil)
	switch {
	case canClientCredentials:
		form := url.Values{"grant_type": {"client_credentials"}, "resource": {from.resource}}
		if from.scope != "" {
			form.Set("scope", from.scope)
		}
		reg := &registration{id: creds.ClientID, secret: creds.ClientSecret, method: secretMethod(from.authMethods)}
		return t.tokenRequest(ctx, creds, reg, key, from, form)
	case t.authorize != nil && from.authorizationEndpoint != "":
		return t.authorizationCode(ctx, creds, tenant, key, from)
	case t.authorize == nil:
		return fmt.Errorf("%w: the authorization server %s does not grant client_credentials, and this client cannot take a user to authorize it", ErrOAuth, from.issuer)
	default:
		return fmt.Errorf("%w: the authorization server %s names no authorization endpoint", ErrOAuth, from.issuer)
	}
}

// authorizationCode runs the authorization_code grant with PKCE: the
// Authorizer takes the user to the authorization URL, and the code it
// brings back is exchanged for a token.
func (t *oauthTransport) authorizationCode(ctx context.Context, creds *ClientCredentials, tenant, key string, from grantTarget) error {
	if !from.legacy && !slices.Contains(from.pkceMethods, "S256") {
		return fmt.Errorf("%w: the authorization server %s does not support PKCE with S256", ErrOAuth, from.issuer)
	}
	reg, err := t.clientFor(ctx, creds, tenant, from)
	if err != nil {
		return err
	}
	verifier, state := randomToken(32), randomToken(16)
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{"response_type": {"code"}, "client_id": {reg.id}, "redirect_uri": {t.redirectURI},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"},
		"state": {state}, "resource": {from.resource}}
	if from.scope != "" {
		q.Set("scope", from.scope)
	}
	authURL, err := url.Parse(from.authorizationEndpoint)
	if err != nil {
		return fmt.Errorf("%w: authorization endpoint: %v", ErrOAuth, err)
	}
	for k, v := range authURL.Query() {
		q[k] = v // the endpoint's own parameters stay
	}
	authURL.RawQuery = q.Encode()
	back, err := t.authorize(ctx, authURL.String())
	if err != nil {
		return fmt.Errorf("%w: authorization at %s: %v", ErrOAuth, from.issuer, err)
	}
	cb, err := url.Parse(back)
	if err != nil {
		return fmt.Errorf("%w: the authorization redirect is not a URL", ErrOAuth)
	}
	got := cb.Query()
	switch {
	case got.Get("state") != state:
		return fmt.Errorf("%w: the authorization redirect's state does not match the request's", ErrOAuth)
	case got.Get("error") != "":
		return fmt.Errorf("%w: authorization refused: %s %s", ErrOAuth, got.Get("error"), got.Get("error_description"))
	case got.Get("code") == "":
		return fmt.Errorf("%w: the authorization redirect carries no code", ErrOAuth)
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {got.Get("code")}, "redirect_uri": {t.redirectURI},
		"code_verifier": {verifier}, "resource": {from.resource}}
	return t.tokenRequest(ctx, creds, reg, key, from, form)
}

// clientFor returns how the client is known to from's server: its
// pre-registered id, its metadata document's URL where the server takes
// those, else the registration it made there (registering once per
// tenant and server).
func (t *oauthTransport) clientFor(ctx context.Context, creds *ClientCredentials, tenant string, from grantTarget) (*registration, error) {
	switch {
	case creds.ClientID != "":
		method := "none"
		if creds.confidential() {
			method = secretMethod(from.authMethods)
		}
		return &registration{id: creds.ClientID, secret: creds.ClientSecret, method: method}, nil
	case creds.ClientMetadataURL != "" && from.cimd:
		return &registration{id: creds.ClientMetadataURL, method: "none"}, nil
	case from.regURL == "":
		return nil, fmt.Errorf("%w: the authorization server %s takes no registration, and the client has no id for it", ErrOAuth, from.issuer)
	}
	rkey := tenant + "\x00" + from.issuer
	t.mu.Lock()
	reg := t.clients[rkey]
	t.mu.Unlock()
	if reg != nil {
		return reg, nil
	}
	method := "none"
	for _, m := range []string{"client_secret_basic", "client_secret_post", "none"} {
		if slices.Contains(from.authMethods, m) {
			method = m
			break
		}
	}
	body, _ := json.Marshal(map[string]any{"client_name": "agentbus", "redirect_uris": []string{t.redirectURI},
		"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"},
		"token_endpoint_auth_method": method})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, from.regURL, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: registration endpoint: %v", ErrOAuth, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := t.send(from.origin, req)
	if err != nil {
		return nil, fmt.Errorf("%w: registration: %w", ErrOAuth, err)
	}
	defer resp.Body.Close()
	var rr struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
		Method       string `json:"token_endpoint_auth_method"`
		Error        string `json:"error"`
		Description  string `json:"error_description"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&rr)
	if resp.StatusCode/100 != 2 || rr.ClientID == "" {
		return nil, fmt.Errorf("%w: the registration endpoint answered %s: %s %s", ErrOAuth, resp.Status, rr.Error, rr.Description)
	}
	reg = &registration{id: rr.ClientID, secret: rr.ClientSecret, method: rr.Method}
	if reg.method == "" {
		reg.method = "none"
		if reg.secret != "" {
			reg.method = secretMethod(from.authMethods)
		}
	}
	t.mu.Lock()
	t.clients[rkey] = reg
	t.mu.Unlock()
	return reg, nil
}

// secretMethod is how a client with a secret authenticates to a server
// taking methods: client_secret_basic unless it takes only
// client_secret_post.
func secretMethod(methods []string) string {
	if len(methods) > 0 && !slices.Contains(methods, "client_secret_basic") && slices.Contains(methods, "client_secret_post") {
		return "client_secret_post"
	}
	return "client_secret_basic"
}

func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// tokenRequest posts form to from's token endpoint as the client reg
// (creds' key signing an assertion when it has one), and keeps the token
// under key.
func (t *oauthTransport) tokenRequest(ctx context.Context, creds *ClientCredentials, reg *registration, key string, from grantTarget, form url.Values) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, from.tokenEndpoint, nil)
	if err != nil {
		return fmt.Errorf("%w: token endpoint: %v", ErrOAuth, err)
	}
	if err := authenticate(creds, reg, req, form, from, t.now()); err != nil {
		return err
	}
	req.Body = io.NopCloser(strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := t.send(from.origin, req)
	if err != nil {
		return fmt.Errorf("%w: token request: %w", ErrOAuth, err)
	}
	defer resp.Body.Close()
	var tr struct {
		AccessToken  string `json:"access_token"`
		TokenType    string `json:"token_type"`
		ExpiresIn    int64  `json:"expires_in"`
		RefreshToken string `json:"refresh_token"`
		Scope        string `json:"scope"`
		Error        string `json:"error"`
		Description  string `json:"error_description"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&tr)
	if resp.StatusCode != http.StatusOK || tr.AccessToken == "" {
		return fmt.Errorf("%w: the token endpoint answered %s: %s %s", ErrOAuth, resp.Status, tr.Error, tr.Description)
	}
	if tr.TokenType != "" && !strings.EqualFold(tr.TokenType, "bearer") {
		return fmt.Errorf("%w: token type %q is not bearer", ErrOAuth, tr.TokenType)
	}
	b := &bearer{token: tr.AccessToken, refresh: tr.RefreshToken, scope: cmp.Or(tr.Scope, from.scope), from: from}
	if b.refresh == "" && form.Get("grant_type") == "refresh_token" {
		b.refresh = form.Get("refresh_token") // the server keeps the old one valid
	}
	if tr.ExpiresIn > 0 {
		life := time.Duration(tr.ExpiresIn) * time.Second
		b.expires, b.margin = t.now().Add(life), min(tokenMargin, life/4)
	}
	t.mu.Lock()
	t.tokens[key] = b
	t.mu.Unlock()
	return nil
}

// authenticate sets the client's authentication on a token request: a
// private_key_jwt assertion when the credentials hold a key, else as reg
// was registered: the secret in the Authorization header
// (client_secret_basic) or the form (client_secret_post), or only the
// client id (a public client).
func authenticate(c *ClientCredentials, reg *registration, req *http.Request, form url.Values, from grantTarget, now time.Time) error {
	switch {
	case len(c.PrivateKeyPEM) > 0 && reg.id == c.ClientID:
		assertion, err := clientAssertion(c, from.signingAlgs, from.audience, now)
		if err != nil {
			return err
		}
		form.Set("client_id", c.ClientID)
		form.Set("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
		form.Set("client_assertion", assertion)
	case reg.secret == "" || reg.method == "none":
		form.Set("client_id", reg.id)
	case reg.method == "client_secret_post":
		form.Set("client_id", reg.id)
		form.Set("client_secret", reg.secret)
	default:
		req.SetBasicAuth(url.QueryEscape(reg.id), url.QueryEscape(reg.secret))
	}
	return nil
}

// clientAssertion signs the private_key_jwt assertion of c for audience
// (the authorization server's issuer): iss and sub the client id, a
// five-minute lifetime, a unique jti.
func clientAssertion(c *ClientCredentials, algs []string, audience string, now time.Time) (string, error) {
	block, _ := pem.Decode(c.PrivateKeyPEM)
	if block == nil {
		return "", fmt.Errorf("%w: the private key is not PEM", ErrOAuth)
	}
	var key any
	var err error
	if key, err = x509.ParsePKCS8PrivateKey(block.Bytes); err != nil {
		if key, err = x509.ParseECPrivateKey(block.Bytes); err != nil {
			if key, err = x509.ParsePKCS1PrivateKey(block.Bytes); err != nil {
				return "", fmt.Errorf("%w: the private key does not parse", ErrOAuth)
			}
		}
	}
	var alg jose.SignatureAlgorithm
	switch key.(type) {
	case *ecdsa.PrivateKey:
		alg = jose.SignatureAlgorithm(cmp.Or(c.Algorithm, string(jose.ES256)))
	case *rsa.PrivateKey:
		alg = jose.SignatureAlgorithm(cmp.Or(c.Algorithm, string(jose.RS256)))
	default:
		return "", fmt.Errorf("%w: the private key is neither EC nor RSA", ErrOAuth)
	}
	if len(algs) > 0 && !slices.Contains(algs, string(alg)) {
		return "", fmt.Errorf("%w: the authorization server takes %v, not %s", ErrOAuth, algs, alg)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", fmt.Errorf("%w: signer: %v", ErrOAuth, err)
	}
	jti := make([]byte, 16)
	_, _ = rand.Read(jti)
	claims, _ := json.Marshal(map[string]any{"iss": c.ClientID, "sub": c.ClientID, "aud": audience,
		"iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(), "jti": hex.EncodeToString(jti)})
	jws, err := signer.Sign(claims)
	if err != nil {
		return "", fmt.Errorf("%w: sign the assertion: %v", ErrOAuth, err)
	}
	return jws.CompactSerialize()
}

// firstJSON decodes into v the first of urls (of the resource at
// origin) that answers 200 with JSON.
func (t *oauthTransport) firstJSON(ctx context.Context, origin string, urls []string, v any) error {
	var errs listError
	for _, u := range urls {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		req.Header.Set("Accept", "application/json")
		resp, err := t.send(origin, req)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		err = func() error {
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: %s", u, resp.Status)
			}
			return json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(v)
		}()
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return errs
}

// listError is the failures of several attempts, in one line; each
// stays matchable (errors.Is, errors.As).
type listError []error

func (l listError) Error() string {
	msgs := make([]string, len(l))
	for i, err := range l {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (l listError) Unwrap() []error { return l }

// challengeParams parses the parameters of a Bearer WWW-Authenticate
// challenge (resource_metadata, scope, error).
func challengeParams(h string) map[string]string {
	out := map[string]string{}
	rest, ok := strings.CutPrefix(strings.TrimSpace(h), "Bearer")
	if !ok {
		return out
	}
	for rest = strings.TrimSpace(rest); rest != ""; {
		name, after, found := strings.Cut(rest, "=")
		if !found {
			break
		}
		name = strings.TrimSpace(strings.TrimLeft(name, ", "))
		after = strings.TrimSpace(after)
		var value string
		if strings.HasPrefix(after, `"`) {
			end := strings.Index(after[1:], `"`)
			if end < 0 {
				break
			}
			value, rest = after[1:1+end], after[2+end:]
		} else {
			value, rest, _ = strings.Cut(after, ",")
		}
		out[strings.ToLower(name)] = strings.TrimSpace(value)
		rest = strings.TrimLeft(strings.TrimSpace(rest), ",")
	}
	return out
}
