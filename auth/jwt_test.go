package auth_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/auth"
)

const (
	testIssuer   = "https://idp.example.test"
	testAudience = "agentbus"
)

var hmacSecret = []byte("0123456789abcdef0123456789abcdef")

type testKeys struct {
	rsa, otherRSA *rsa.PrivateKey
	ec            *ecdsa.PrivateKey
}

// signingKeys generates the test keys once per test binary.
var signingKeys = sync.OnceValue(func() testKeys {
	var k testKeys
	var err error
	if k.rsa, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		panic(err)
	}
	if k.otherRSA, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		panic(err)
	}
	if k.ec, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		panic(err)
	}
	return k
})

// sign returns a compact JWS of c signed with key under alg, naming kid
// unless it is "".
func sign(t testing.TB, alg string, key any, kid string, c map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: jose.SignatureAlgorithm(alg), Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(signer).Claims(c).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// claims returns valid claims for tenant expiring in ttl.
func claims(tenant string, ttl time.Duration) map[string]any {
	now := time.Now()
	return map[string]any{
		"iss": testIssuer, "aud": []string{"other", testAudience}, "sub": "sub-1",
		"tenant_id": tenant, "user_id": "alice",
		"exp": now.Add(ttl).Unix(), "iat": now.Unix(),
	}
}

func with(c map[string]any, kv ...any) map[string]any {
	out := make(map[string]any, len(c))
	for k, v := range c {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
		} else {
			out[kv[i].(string)] = kv[i+1]
		}
	}
	return out
}

func jwks(t *testing.T, keys ...jose.JSONWebKey) []byte {
	t.Helper()
	data, err := json.Marshal(jose.JSONWebKeySet{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func rsaJWK(k *rsa.PrivateKey, kid string) jose.JSONWebKey {
	return jose.JSONWebKey{Key: &k.PublicKey, KeyID: kid, Algorithm: "RS256", Use: "sig"}
}

// fileJWT returns a verifier reading a JWKS file with rsa1 and ec1.
func fileJWT(t *testing.T, cfg auth.JWTConfig) *auth.JWT {
	t.Helper()
	k := signingKeys()
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, jwks(t, rsaJWK(k.rsa, "rsa1"), jose.JSONWebKey{Key: &k.ec.PublicKey, KeyID: "ec1"}), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.JWKSFile = path
	j, err := auth.NewJWT(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func strictConfig() auth.JWTConfig { return auth.JWTConfig{Issuer: testIssuer, Audience: testAudience} }

func TestJWTAccepted(t *testing.T) {
	k := signingKeys()
	j := fileJWT(t, strictConfig())
	alice := auth.Identity{TenantID: "acme", UserID: "alice", Method: auth.MethodJWT}
	for name, tc := range map[string]struct {
		token string
		want  auth.Identity
	}{
		"RS256":                 {sign(t, "RS256", k.rsa, "rsa1", claims("acme", time.Hour)), alice},
		"ES256":                 {sign(t, "ES256", k.ec, "ec1", claims("acme", time.Hour)), alice},
		"ES256 without kid":     {sign(t, "ES256", k.ec, "", claims("acme", time.Hour)), alice},
		"sub when no user_id":   {sign(t, "RS256", k.rsa, "rsa1", with(claims("acme", time.Hour), "user_id", nil)), auth.Identity{TenantID: "acme", UserID: "sub-1", Method: auth.MethodJWT}},
		"no user at all":        {sign(t, "RS256", k.rsa, "rsa1", with(claims("acme", time.Hour), "user_id", nil, "sub", nil)), auth.Identity{TenantID: "acme", Method: auth.MethodJWT}},
		"email user":            {sign(t, "RS256", k.rsa, "rsa1", with(claims("acme", time.Hour), "user_id", "a.b@example.com")), auth.Identity{TenantID: "acme", UserID: "a.b@example.com", Method: auth.MethodJWT}},
		"expired within leeway": {sign(t, "RS256", k.rsa, "rsa1", claims("acme", -10*time.Second)), alice},
		"string aud":            {sign(t, "RS256", k.rsa, "rsa1", with(claims("acme", time.Hour), "aud", testAudience)), alice},
	} {
		t.Run(name, func(t *testing.T) {
			id, err := j.Verify(t.Context(), tc.token)
			if err != nil || id != tc.want {
				t.Fatalf("Verify = %+v, %v; want %+v", id, err, tc.want)
			}
		})
	}

	custom := fileJWT(t, auth.JWTConfig{TenantClaim: "org", UserClaim: "uid"})
	tok := sign(t, "RS256", k.rsa, "rsa1", with(claims("ignored", time.Hour), "org", "globex", "uid", "bob"))
	if id, err := custom.Verify(t.Context(), tok); err != nil || id.TenantID != "globex" || id.UserID != "bob" {
		t.Errorf("custom claims: %+v, %v", id, err)
	}
}

// unsigned hand-crafts a token with header alg and an arbitrary signature.
func unsigned(alg, sig string, c map[string]any) string {
	h, _ := json.Marshal(map[string]string{"alg": alg, "typ": "JWT"})
	p, _ := json.Marshal(c)
	enc := base64.RawURLEncoding.EncodeToString
	return enc(h) + "." + enc(p) + "." + sig
}

func TestJWTRefused(t *testing.T) {
	k := signingKeys()
	j := fileJWT(t, strictConfig())
	good := claims("acme", time.Hour)
	valid := sign(t, "RS256", k.rsa, "rsa1", good)
	parts := strings.Split(valid, ".")
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString(mustJSON(with(good, "tenant_id", "globex"))) + "." + parts[2]
	for name, token := range map[string]string{
		"expired":              sign(t, "RS256", k.rsa, "rsa1", claims("acme", -time.Hour)),
		"no exp":               sign(t, "RS256", k.rsa, "rsa1", with(good, "exp", nil)),
		"not yet valid":        sign(t, "RS256", k.rsa, "rsa1", with(good, "nbf", time.Now().Add(time.Hour).Unix())),
		"issued in the future": sign(t, "RS256", k.rsa, "rsa1", with(good, "iat", time.Now().Add(time.Hour).Unix())),
		"wrong audience":       sign(t, "RS256", k.rsa, "rsa1", with(good, "aud", "someone-else")),
		"no audience":          sign(t, "RS256", k.rsa, "rsa1", with(good, "aud", nil)),
		"wrong issuer":         sign(t, "RS256", k.rsa, "rsa1", with(good, "iss", "https://evil.test")),
		"other key, known kid": sign(t, "RS256", k.otherRSA, "rsa1", good),
		"unknown kid":          sign(t, "RS256", k.otherRSA, "rsa9", good),
		"RSA kid on EC token":  sign(t, "ES256", k.ec, "rsa1", good),
		"tampered payload":     tampered,
		"alg none":             unsigned("none", "", good),
		"alg none with sig":    unsigned("none", parts[2], good),
		"alg None":             unsigned("None", "", good),
		"HS256 without secret": sign(t, "HS256", hmacSecret, "", good),
		"RS384":                sign(t, "RS384", k.rsa, "rsa1", good),
		"PS256":                sign(t, "PS256", k.rsa, "rsa1", good),
		"missing tenant":       sign(t, "RS256", k.rsa, "rsa1", with(good, "tenant_id", nil)),
		"tenant with dot":      sign(t, "RS256", k.rsa, "rsa1", with(good, "tenant_id", "acme.corp")),
		"tenant wildcard":      sign(t, "RS256", k.rsa, "rsa1", with(good, "tenant_id", "*")),
		"tenant not a string":  sign(t, "RS256", k.rsa, "rsa1", with(good, "tenant_id", 42)),
		"empty tenant":         sign(t, "RS256", k.rsa, "rsa1", with(good, "tenant_id", "")),
		"user not a string":    sign(t, "RS256", k.rsa, "rsa1", with(good, "user_id", []string{"a"})),
		"user too long":        sign(t, "RS256", k.rsa, "rsa1", with(good, "user_id", strings.Repeat("u", 129))),
		"user control char":    sign(t, "RS256", k.rsa, "rsa1", with(good, "user_id", "a\nb")),
		"garbage":              "a.b.c",
		"empty":                "",
	} {
		t.Run(name, func(t *testing.T) { refused(t, j, token) })
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func TestJWTHS256Development(t *testing.T) {
	k := signingKeys()
	j, err := auth.NewJWT(t.Context(), auth.JWTConfig{HS256Secret: hmacSecret})
	if err != nil {
		t.Fatal(err)
	}
	if id, err := j.Verify(t.Context(), sign(t, "HS256", hmacSecret, "", claims("acme", time.Hour))); err != nil || id.TenantID != "acme" {
		t.Errorf("HS256: %+v, %v", id, err)
	}
	refused(t, j, sign(t, "HS256", []byte("another-secret-another-secret-xx"), "", claims("acme", time.Hour)))
	refused(t, j, sign(t, "RS256", k.rsa, "rsa1", claims("acme", time.Hour)))
	refused(t, j, sign(t, "HS384", append(hmacSecret, hmacSecret...), "", claims("acme", time.Hour)))
}

func TestJWTConfigValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg auth.JWTConfig
		ok  bool
	}{
		"nothing":         {auth.JWTConfig{Issuer: testIssuer}, false},
		"file and URL":    {auth.JWTConfig{JWKSFile: "x.json", JWKSURL: "https://idp.test/jwks"}, false},
		"short secret":    {auth.JWTConfig{HS256Secret: []byte("short")}, false},
		"bad URL":         {auth.JWTConfig{JWKSURL: "ftp://idp.test/jwks"}, false},
		"relative URL":    {auth.JWTConfig{JWKSURL: "/jwks"}, false},
		"negative leeway": {auth.JWTConfig{JWKSFile: "x.json", Leeway: -time.Second}, false},
		"file":            {auth.JWTConfig{JWKSFile: "x.json"}, true},
		"URL and secret":  {auth.JWTConfig{JWKSURL: "https://idp.test/jwks", HS256Secret: hmacSecret}, true},
	} {
		err := tc.cfg.Validate()
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, auth.ErrInvalidConfig)) {
			t.Errorf("%s: Validate = %v; ok want %v", name, err, tc.ok)
		}
	}
	if _, err := auth.NewJWT(t.Context(), auth.JWTConfig{JWKSFile: filepath.Join(t.TempDir(), "missing.json")}); !errors.Is(err, auth.ErrInvalidConfig) {
		t.Errorf("missing JWKS file: %v", err)
	}
	empty := filepath.Join(t.TempDir(), "empty.json")
	_ = os.WriteFile(empty, []byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`), 0o600)
	if _, err := auth.NewJWT(t.Context(), auth.JWTConfig{JWKSFile: empty}); !errors.Is(err, auth.ErrInvalidConfig) {
		t.Errorf("JWKS with only a symmetric key: %v", err)
	}
}

// jwksServer serves a JWKS that the test can change or break.
type jwksServer struct {
	*httptest.Server
	mu      sync.Mutex
	body    []byte
	failing bool
	fetches atomic.Int32
}

func newJWKSServer(t *testing.T, body []byte) *jwksServer {
	s := &jwksServer{body: body}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.fetches.Add(1)
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.failing {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(s.body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) set(body []byte, failing bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.body, s.failing = body, failing
}

func TestJWTFromURL(t *testing.T) {
	k := signingKeys()
	srv := newJWKSServer(t, jwks(t, rsaJWK(k.rsa, "rsa1")))
	j, err := auth.NewJWT(t.Context(), auth.JWTConfig{JWKSURL: srv.URL, Issuer: testIssuer, Audience: testAudience})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	auth.SetClock(j, func() time.Time { return now })
	fetches := func(want int32) {
		t.Helper()
		if got := srv.fetches.Load(); got != want {
			t.Fatalf("JWKS fetched %d times; want %d", got, want)
		}
	}
	rsa1 := sign(t, "RS256", k.rsa, "rsa1", claims("acme", time.Hour))
	rsa2 := sign(t, "RS256", k.otherRSA, "rsa2", claims("acme", time.Hour))
	if id, err := j.Verify(t.Context(), rsa1); err != nil || id.TenantID != "acme" {
		t.Fatalf("rsa1: %+v, %v", id, err)
	}
	fetches(1)

	// A new key is published: its kid is unknown, fetched again at most
	// once per MinRefetchInterval.
	srv.set(jwks(t, rsaJWK(k.rsa, "rsa1"), rsaJWK(k.otherRSA, "rsa2")), false)
	refused(t, j, rsa2)
	fetches(1)
	now = now.Add(auth.MinRefetchInterval + time.Second)
	if _, err := j.Verify(t.Context(), rsa2); err != nil {
		t.Fatalf("rsa2 after refetch: %v", err)
	}
	fetches(2)
	refused(t, j, sign(t, "RS256", k.otherRSA, "rsa3", claims("acme", time.Hour)))
	fetches(2)
	// No kid with two RSA keys is ambiguous.
	refused(t, j, sign(t, "RS256", k.rsa, "", claims("acme", time.Hour)))

	// Old keys: fetched again; when that fails the old keys still serve.
	srv.set(nil, true)
	now = now.Add(auth.DefaultRefreshEvery + time.Second)
	if _, err := j.Verify(t.Context(), rsa1); err != nil {
		t.Fatalf("rsa1 with the JWKS URL failing: %v", err)
	}
	fetches(3)
	// An unknown kid while the URL fails: unavailable, not refused.
	now = now.Add(auth.MinRefetchInterval + time.Second)
	_, err = j.Verify(t.Context(), sign(t, "RS256", k.otherRSA, "rsa4", claims("acme", time.Hour)))
	if errors.Is(err, auth.ErrUnauthenticated) || !errors.Is(err, auth.ErrUnavailable) {
		t.Fatalf("unknown kid with the JWKS URL failing: %v; want ErrUnavailable", err)
	}
	fetches(4)

	// A key withdrawn from the set is refused once the set is fetched.
	srv.set(jwks(t, rsaJWK(k.otherRSA, "rsa2")), false)
	now = now.Add(auth.DefaultRefreshEvery + time.Second)
	refused(t, j, rsa1)
	if _, err := j.Verify(t.Context(), rsa2); err != nil {
		t.Fatalf("rsa2 after rsa1 withdrawn: %v", err)
	}
}

func TestJWTURLUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	if _, err := auth.NewJWT(t.Context(), auth.JWTConfig{JWKSURL: url}); !errors.Is(err, auth.ErrUnavailable) {
		t.Errorf("closed JWKS URL: %v; want ErrUnavailable", err)
	}
	notFound := httptest.NewServer(http.NotFoundHandler())
	defer notFound.Close()
	if _, err := auth.NewJWT(t.Context(), auth.JWTConfig{JWKSURL: notFound.URL}); !errors.Is(err, auth.ErrUnavailable) {
		t.Errorf("JWKS URL answering 404: %v; want ErrUnavailable", err)
	}
}
