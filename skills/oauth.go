package skills

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// OAuth to Skill Services (MCP authorization, 2025-11-25, with the
// client-credentials extension, SEP-1046). A Skill Service that answers a
// call 401 names its protected-resource metadata in WWW-Authenticate (or
// it is at the well-known URL); that names the authorization server, whose
// metadata names the token endpoint. The client asks it for a token with
// the client_credentials grant, authenticating with client_secret_basic
// (client_secret_post when the server takes only that) or a private_key_jwt
// assertion, for the resource and the scope the challenge (or the
// metadata) names. The token is kept per resource until shortly before it
// expires, then fetched again; a 401 with a kept token fetches a new one
// once. Secrets, assertions and tokens never appear in an error.

// ClientCredentials are a client's OAuth credentials for the
// client_credentials grant. Exactly one of ClientSecret and PrivateKeyPEM
// is set.
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
}

// ErrOAuth reports a failed OAuth discovery or token request.
var ErrOAuth = errors.New("skills: oauth")

// tokenMargin is how long before its expiry a token is fetched again (a
// quarter of its lifetime for a shorter-lived one).
const tokenMargin = 30 * time.Second

// oauthTransport adds the bearer token of the request's tenant's
// ClientCredentials to every request, fetching it when the server asks
// (401). A tenant without credentials is sent as is.
type oauthTransport struct {
	base  http.RoundTripper
	creds func(tenant string) *ClientCredentials
	now   func() time.Time

	mu     sync.Mutex
	tokens map[string]*bearer // by tenant and resource (scheme, host, path)
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
	expires time.Time     // zero: no expiry given
	margin  time.Duration // fetched again this long before it expires
	from    grantTarget   // where it came from: its renewal is asked there
}

// grantTarget is what discovery found for a resource: where and how to
// ask for its tokens.
type grantTarget struct {
	tokenEndpoint, audience, resource, scope string
	authMethods, signingAlgs                 []string
}

func newOAuthTransport(base http.RoundTripper, creds func(string) *ClientCredentials) *oauthTransport {
	return &oauthTransport{base: base, creds: creds, now: time.Now, tokens: map[string]*bearer{}}
}

func resourceKey(u *url.URL) string { return u.Scheme + "://" + u.Host + u.Path }

// tokenKey keys a token by its tenant and resource.
func tokenKey(tenant string, u *url.URL) string { return tenant + "\x00" + resourceKey(u) }

func (t *oauthTransport) token(key string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.tokens[key]
	if b == nil || !b.expires.IsZero() && !t.now().Before(b.expires.Add(-b.margin)) {
		return ""
	}
	return b.token
}

func (t *oauthTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	tenant := tenantFrom(req.Context())
	creds := t.creds(tenant)
	if creds == nil {
		return t.base.RoundTrip(req)
	}
	key := tokenKey(tenant, req.URL)
	tok := t.token(key)
	if tok == "" && req.Header.Get("Authorization") == "" {
		// A token that expired is renewed before the request, not after
		// a 401, where the last one came from: only when the server has
		// asked before is one known.
		t.mu.Lock()
		last := t.tokens[key]
		t.mu.Unlock()
		if last != nil {
			if err := t.grant(req.Context(), creds, key, last.from); err != nil {
				return nil, err
			}
			tok = t.token(key)
		}
	}
	resp, err := t.base.RoundTrip(withBearer(req, tok))
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, err
	}
	if req.Body != nil && req.GetBody == nil {
		return resp, nil // cannot be sent again
	}
	challenge := resp.Header.Get("WWW-Authenticate")
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	from, err := t.discover(req.Context(), creds, req.URL, challenge)
	if err != nil {
		return nil, err
	}
	if err := t.grant(req.Context(), creds, key, from); err != nil {
		return nil, err
	}
	retry := req.Clone(req.Context())
	if req.GetBody != nil {
		if retry.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
	return t.base.RoundTrip(withBearer(retry, t.token(key)))
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
// challenge, else the well-known metadata), its token endpoint and how
// creds ask it for a token.
func (t *oauthTransport) discover(ctx context.Context, creds *ClientCredentials, u *url.URL, challenge string) (grantTarget, error) {
	params := challengeParams(challenge)
	prmURLs := []string{}
	if v := params["resource_metadata"]; v != "" {
		prmURLs = append(prmURLs, v)
	}
	origin := u.Scheme + "://" + u.Host
	if p := strings.TrimSuffix(u.Path, "/"); p != "" {
		prmURLs = append(prmURLs, origin+"/.well-known/oauth-protected-resource"+p)
	}
	prmURLs = append(prmURLs, origin+"/.well-known/oauth-protected-resource")
	var prm struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
		ScopesSupported      []string `json:"scopes_supported"`
	}
	if err := t.firstJSON(ctx, prmURLs, &prm); err != nil {
		return grantTarget{}, fmt.Errorf("%w: protected resource metadata of %s: %v", ErrOAuth, resourceKey(u), err)
	}
	if len(prm.AuthorizationServers) == 0 {
		return grantTarget{}, fmt.Errorf("%w: the protected resource metadata of %s names no authorization server", ErrOAuth, resourceKey(u))
	}
	issuer, err := url.Parse(prm.AuthorizationServers[0])
	if err != nil || issuer.Host == "" {
		return grantTarget{}, fmt.Errorf("%w: authorization server %q is not a URL", ErrOAuth, prm.AuthorizationServers[0])
	}
	ipath := strings.TrimSuffix(issuer.Path, "/")
	iorigin := issuer.Scheme + "://" + issuer.Host
	var asm struct {
		Issuer          string   `json:"issuer"`
		TokenEndpoint   string   `json:"token_endpoint"`
		AuthMethods     []string `json:"token_endpoint_auth_methods_supported"`
		SigningAlgs     []string `json:"token_endpoint_auth_signing_alg_values_supported"`
		GrantTypes      []string `json:"grant_types_supported"`
		ScopesSupported []string `json:"scopes_supported"`
	}
	metaURLs := []string{iorigin + "/.well-known/oauth-authorization-server" + ipath, iorigin + "/.well-known/openid-configuration" + ipath}
	if ipath != "" {
		metaURLs = append(metaURLs, iorigin+ipath+"/.well-known/openid-configuration")
	}
	if err := t.firstJSON(ctx, metaURLs, &asm); err != nil {
		return grantTarget{}, fmt.Errorf("%w: authorization server metadata of %s: %v", ErrOAuth, prm.AuthorizationServers[0], err)
	}
	if asm.TokenEndpoint == "" {
		return grantTarget{}, fmt.Errorf("%w: the authorization server %s names no token endpoint", ErrOAuth, prm.AuthorizationServers[0])
	}
	if len(asm.GrantTypes) > 0 && !slices.Contains(asm.GrantTypes, "client_credentials") {
		return grantTarget{}, fmt.Errorf("%w: the authorization server %s does not grant client_credentials", ErrOAuth, prm.AuthorizationServers[0])
	}
	scopes := prm.ScopesSupported
	if len(scopes) == 0 {
		scopes = creds.Scopes
	}
	return grantTarget{tokenEndpoint: asm.TokenEndpoint, audience: cmp.Or(asm.Issuer, prm.AuthorizationServers[0]),
		resource: cmp.Or(prm.Resource, resourceKey(u)), scope: cmp.Or(params["scope"], strings.Join(scopes, " ")),
		authMethods: asm.AuthMethods, signingAlgs: asm.SigningAlgs}, nil
}

// grant asks from's token endpoint for a client_credentials token with
// creds, and keeps it under key.
func (t *oauthTransport) grant(ctx context.Context, creds *ClientCredentials, key string, from grantTarget) error {
	form := url.Values{"grant_type": {"client_credentials"}, "resource": {from.resource}}
	if from.scope != "" {
		form.Set("scope", from.scope)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, from.tokenEndpoint, nil)
	if err != nil {
		return fmt.Errorf("%w: token endpoint: %v", ErrOAuth, err)
	}
	if err := authenticate(creds, req, form, from.authMethods, from.signingAlgs, from.audience, t.now()); err != nil {
		return err
	}
	req.Body = io.NopCloser(strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return fmt.Errorf("%w: token request: %v", ErrOAuth, err)
	}
	defer resp.Body.Close()
	var tr struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
		ExpiresIn   int64  `json:"expires_in"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&tr)
	if resp.StatusCode != http.StatusOK || tr.AccessToken == "" {
		return fmt.Errorf("%w: the token endpoint answered %s: %s %s", ErrOAuth, resp.Status, tr.Error, tr.Description)
	}
	if tr.TokenType != "" && !strings.EqualFold(tr.TokenType, "bearer") {
		return fmt.Errorf("%w: token type %q is not bearer", ErrOAuth, tr.TokenType)
	}
	b := &bearer{token: tr.AccessToken, from: from}
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
// private_key_jwt assertion when the credentials hold a key, else the
// secret in the Authorization header (client_secret_basic) unless the
// server takes it only in the form (client_secret_post).
func authenticate(c *ClientCredentials, req *http.Request, form url.Values, methods, algs []string, audience string, now time.Time) error {
	if len(c.PrivateKeyPEM) > 0 {
		assertion, err := clientAssertion(c, algs, audience, now)
		if err != nil {
			return err
		}
		form.Set("client_id", c.ClientID)
		form.Set("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
		form.Set("client_assertion", assertion)
		return nil
	}
	if len(methods) > 0 && !slices.Contains(methods, "client_secret_basic") && slices.Contains(methods, "client_secret_post") {
		form.Set("client_id", c.ClientID)
		form.Set("client_secret", c.ClientSecret)
		return nil
	}
	req.SetBasicAuth(url.QueryEscape(c.ClientID), url.QueryEscape(c.ClientSecret))
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
	alg := jose.SignatureAlgorithm(c.Algorithm)
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

// firstJSON decodes into v the first of urls that answers 200 with JSON.
func (t *oauthTransport) firstJSON(ctx context.Context, urls []string, v any) error {
	var errs []string
	for _, u := range urls {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		req.Header.Set("Accept", "application/json")
		resp, err := t.base.RoundTrip(req)
		if err != nil {
			errs = append(errs, err.Error())
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
		errs = append(errs, err.Error())
	}
	return errors.New(strings.Join(errs, "; "))
}

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
