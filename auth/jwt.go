package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"
	"unicode"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// JWT defaults and limits.
const (
	// DefaultTenantClaim is the claim holding the tenant id.
	DefaultTenantClaim = "tenant_id"
	// DefaultUserClaim is the claim holding the user id ("sub" when absent).
	DefaultUserClaim = "user_id"
	// DefaultLeeway is the clock skew allowed on exp, nbf and iat.
	DefaultLeeway = 30 * time.Second
	// DefaultRefreshEvery is how old a JWKS fetched from a URL may get
	// before it is fetched again.
	DefaultRefreshEvery = 5 * time.Minute
	// MinRefetchInterval is the least time between two fetches of a JWKS
	// URL, whether for age or for an unknown kid.
	MinRefetchInterval = 30 * time.Second

	maxUserLen    = 128
	minHMACSecret = 32 // bytes: HS256 needs a key as long as its hash
)

// ErrInvalidConfig marks a JWTConfig that cannot work.
var ErrInvalidConfig = errors.New("auth: invalid JWT config")

// JWTConfig configures NewJWT. At least one key source is required.
type JWTConfig struct {
	// JWKSFile is the path of a JWKS JSON file with the RS256/ES256 public
	// keys; it is read once, by NewJWT.
	JWKSFile string
	// JWKSURL is a URL serving the JWKS instead. It is fetched by NewJWT,
	// again once the keys are RefreshEvery old, and on a token with an
	// unknown kid; never more than once per MinRefetchInterval.
	JWKSURL string
	// RefreshEvery defaults to DefaultRefreshEvery.
	RefreshEvery time.Duration
	// HTTPClient fetches JWKSURL; default a client with a 10s timeout.
	HTTPClient *http.Client
	// HS256Secret is a shared HMAC secret, for development: when set, HS256
	// tokens are accepted too. It must be at least 32 bytes.
	HS256Secret []byte
	// Issuer, when set, is the required "iss".
	Issuer string
	// Audience, when set, must be a member of "aud".
	Audience string
	// TenantClaim defaults to DefaultTenantClaim.
	TenantClaim string
	// UserClaim defaults to DefaultUserClaim; "sub" is used when the token
	// does not have it.
	UserClaim string
	// Leeway defaults to DefaultLeeway.
	Leeway time.Duration
}

// Validate checks that c has at least one key source, not both a JWKS file
// and a URL, and sane values.
func (c JWTConfig) Validate() error {
	switch {
	case c.JWKSFile == "" && c.JWKSURL == "" && len(c.HS256Secret) == 0:
		return fmt.Errorf("%w: no key source (JWKS file, JWKS URL or HS256 secret)", ErrInvalidConfig)
	case c.JWKSFile != "" && c.JWKSURL != "":
		return fmt.Errorf("%w: JWKS file and JWKS URL are exclusive", ErrInvalidConfig)
	case len(c.HS256Secret) > 0 && len(c.HS256Secret) < minHMACSecret:
		return fmt.Errorf("%w: HS256 secret shorter than %d bytes", ErrInvalidConfig, minHMACSecret)
	case c.Leeway < 0 || c.RefreshEvery < 0:
		return fmt.Errorf("%w: negative leeway or refresh interval", ErrInvalidConfig)
	}
	if c.JWKSURL != "" {
		u, err := url.Parse(c.JWKSURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("%w: JWKS URL %q is not an http(s) URL", ErrInvalidConfig, c.JWKSURL)
		}
	}
	return nil
}

// withDefaults fills the zero fields of c.
func (c JWTConfig) withDefaults() JWTConfig {
	if c.RefreshEvery == 0 {
		c.RefreshEvery = DefaultRefreshEvery
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if c.TenantClaim == "" {
		c.TenantClaim = DefaultTenantClaim
	}
	if c.UserClaim == "" {
		c.UserClaim = DefaultUserClaim
	}
	if c.Leeway == 0 {
		c.Leeway = DefaultLeeway
	}
	return c
}

// JWT verifies signed JWT bearer tokens. It is safe for concurrent use.
type JWT struct {
	cfg  JWTConfig
	algs []jose.SignatureAlgorithm
	now  func() time.Time

	fetchMu sync.Mutex // serializes JWKS fetches
	mu      sync.Mutex // guards the fields below
	keys    []jose.JSONWebKey
	fetched time.Time // last successful fetch of JWKSURL
	tried   time.Time // last fetch attempt of JWKSURL
}

var _ Verifier = (*JWT)(nil)

// NewJWT validates cfg, loads its JWKS (reading JWKSFile or fetching
// JWKSURL) and returns the verifier. A JWKS URL that cannot be fetched
// yields an error wrapping ErrUnavailable.
func NewJWT(ctx context.Context, cfg JWTConfig) (*JWT, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	j := &JWT{cfg: cfg.withDefaults(), now: time.Now}
	if cfg.JWKSFile != "" || cfg.JWKSURL != "" {
		j.algs = append(j.algs, jose.RS256, jose.ES256)
	}
	if len(cfg.HS256Secret) > 0 {
		j.algs = append(j.algs, jose.HS256)
	}
	switch {
	case cfg.JWKSFile != "":
		data, err := os.ReadFile(cfg.JWKSFile)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		if j.keys, err = parseJWKS(data); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalidConfig, cfg.JWKSFile, err)
		}
	case cfg.JWKSURL != "":
		if err := j.refresh(ctx, true); err != nil {
			return nil, err
		}
	}
	return j, nil
}

// Verify checks a JWT's signature, algorithm and claims and returns the
// identity it proves.
func (j *JWT) Verify(ctx context.Context, token string) (Identity, error) {
	if len(token) > maxTokenLen {
		return Identity{}, unauthenticated("JWT too long")
	}
	tok, err := jwt.ParseSigned(token, j.algs)
	if err != nil {
		return Identity{}, unauthenticated("malformed JWT or algorithm not accepted")
	}
	if len(tok.Headers) != 1 {
		return Identity{}, unauthenticated("JWT must have exactly one signature")
	}
	h := tok.Headers[0]
	key, err := j.key(ctx, jose.SignatureAlgorithm(h.Algorithm), h.KeyID)
	if err != nil {
		return Identity{}, err
	}
	var std jwt.Claims
	var custom map[string]any
	if err := tok.Claims(key, &std, &custom); err != nil {
		return Identity{}, unauthenticated("JWT signature does not verify")
	}
	if std.Expiry == nil {
		return Identity{}, unauthenticated("JWT has no exp claim")
	}
	want := jwt.Expected{Issuer: j.cfg.Issuer, Time: j.now()}
	if j.cfg.Audience != "" {
		want.AnyAudience = jwt.Audience{j.cfg.Audience}
	}
	if err := std.ValidateWithLeeway(want, j.cfg.Leeway); err != nil {
		return Identity{}, fmt.Errorf("%w: %w", ErrUnauthenticated, err)
	}
	tenant, _ := custom[j.cfg.TenantClaim].(string)
	if !ValidID(tenant) {
		return Identity{}, unauthenticated(fmt.Sprintf("JWT claim %q is missing or not a tenant id", j.cfg.TenantClaim))
	}
	user := std.Subject
	if v, ok := custom[j.cfg.UserClaim]; ok {
		if user, ok = v.(string); !ok {
			return Identity{}, unauthenticated(fmt.Sprintf("JWT claim %q is not a string", j.cfg.UserClaim))
		}
	}
	if !validUser(user) {
		return Identity{}, unauthenticated("JWT user id is not acceptable")
	}
	return Identity{TenantID: tenant, UserID: user, Method: MethodJWT}, nil
}

// validUser applies the ingress's user_id rule (at most 128 characters)
// and refuses control characters; "" means no user.
func validUser(s string) bool {
	if len(s) > maxUserLen {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return false
		}
	}
	return true
}

// key returns the verification key for a token signed with alg whose
// header names kid, fetching the JWKS again when it is old or does not
// know kid.
func (j *JWT) key(ctx context.Context, alg jose.SignatureAlgorithm, kid string) (any, error) {
	if alg == jose.HS256 {
		return j.cfg.HS256Secret, nil // ParseSigned accepted HS256, so it is configured
	}
	var fetchErr error
	if j.cfg.JWKSURL != "" && j.due(false) {
		fetchErr = j.refresh(ctx, false) // keep the old keys if it fails
	}
	if k, ok := pick(j.currentKeys(), alg, kid); ok {
		return k, nil
	}
	if j.cfg.JWKSURL != "" && j.due(true) {
		fetchErr = j.refresh(ctx, true)
		if k, ok := pick(j.currentKeys(), alg, kid); ok {
			return k, nil
		}
	}
	if fetchErr != nil {
		return nil, fetchErr // the key may exist: say unavailable, not refused
	}
	if len(kid) > 64 {
		kid = kid[:64] + "…" // the kid is the caller's: keep messages short
	}
	return nil, unauthenticated(fmt.Sprintf("no %s key for kid %q", alg, kid))
}

// due reports whether the JWKS URL may be fetched now: for an unknown kid
// (unknownKid) or because the keys are RefreshEvery old, and not within
// MinRefetchInterval of the last attempt.
func (j *JWT) due(unknownKid bool) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	now := j.now()
	if now.Sub(j.tried) < MinRefetchInterval {
		return false
	}
	return unknownKid || now.Sub(j.fetched) >= j.cfg.RefreshEvery
}

func (j *JWT) currentKeys() []jose.JSONWebKey {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.keys
}

// refresh fetches the JWKS URL and replaces the keys, unless another
// caller fetched it while this one waited.
func (j *JWT) refresh(ctx context.Context, unknownKid bool) error {
	j.fetchMu.Lock()
	defer j.fetchMu.Unlock()
	if !j.tried.IsZero() && !j.due(unknownKid) {
		return nil
	}
	j.mu.Lock()
	j.tried = j.now()
	j.mu.Unlock()
	keys, err := fetchJWKS(ctx, j.cfg.HTTPClient, j.cfg.JWKSURL)
	if err != nil {
		return err
	}
	j.mu.Lock()
	j.keys, j.fetched = keys, j.now()
	j.mu.Unlock()
	return nil
}

// pick returns the key of keys for alg named kid; with no kid, the only
// key for alg, if there is exactly one.
func pick(keys []jose.JSONWebKey, alg jose.SignatureAlgorithm, kid string) (any, bool) {
	var found []jose.JSONWebKey
	for _, k := range keys {
		if (kid == "" || k.KeyID == kid) && fits(k, alg) {
			found = append(found, k)
		}
	}
	if len(found) == 0 || (kid == "" && len(found) > 1) {
		return nil, false
	}
	return found[0].Key, true
}
