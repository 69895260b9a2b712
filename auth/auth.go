package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentbus/agentbus/events"
)

// Method names carried in Identity.Method.
const (
	// MethodAPIKey marks an identity proven by a tenant API key.
	MethodAPIKey = "api_key"
	// MethodJWT marks an identity proven by a signed JWT.
	MethodJWT = "jwt"
)

// maxTokenLen bounds the bearer credentials the verifiers look at; longer
// ones are refused before any parsing.
const maxTokenLen = 16 << 10

// Identity is who a request speaks for, as its credential proves.
type Identity struct {
	TenantID string
	UserID   string // "" when the credential does not bind a user
	Method   string // MethodAPIKey or MethodJWT
	KeyID    string // the API key's id (never its secret); "" for JWT
}

// ErrUnauthenticated is wrapped by every error that refuses a bad,
// unknown, revoked, expired or malformed credential: the caller should
// answer 401. Its messages never contain the credential.
var ErrUnauthenticated = errors.New("auth: unauthenticated")

// ErrUnavailable is wrapped by errors that say nothing about the
// credential: the key store or the JWKS endpoint could not be reached. The
// caller should answer 503 and the client may retry.
var ErrUnavailable = errors.New("auth: verifier unavailable")

// ErrInvalidID marks a tenant or user id that does not have the id syntax
// (1 to 64 letters, digits, '_' or '-').
var ErrInvalidID = errors.New("auth: invalid id")

// Verifier verifies a bearer credential (the value after "Bearer ").
type Verifier interface {
	Verify(ctx context.Context, token string) (Identity, error)
}

// ValidID reports whether s has the id syntax of tenants (and of the
// users a key binds): it becomes a NATS subject token, so only letters,
// digits, '_' and '-', 1 to 64 of them; wildcards and dots are refused.
func ValidID(s string) bool { return events.ValidToken(s) }

// Select returns a Verifier that routes a token by its shape: tokens with
// KeyPrefix go to keys, tokens shaped like a JWS compact serialization
// (three base64url parts separated by dots) go to jwt. Either may be nil,
// and then that kind of token is refused with ErrUnauthenticated, as is a
// token of neither shape.
func Select(keys *Keys, jwt *JWT) Verifier {
	return selector{keys: keys, jwt: jwt}
}

type selector struct {
	keys *Keys
	jwt  *JWT
}

// Verify implements Verifier.
func (s selector) Verify(ctx context.Context, token string) (Identity, error) {
	switch {
	case len(token) > maxTokenLen:
		return Identity{}, unauthenticated("credential too long")
	case strings.HasPrefix(token, KeyPrefix):
		if s.keys == nil {
			return Identity{}, unauthenticated("API keys are not accepted")
		}
		return s.keys.Verify(ctx, token)
	case looksLikeJWT(token):
		if s.jwt == nil {
			return Identity{}, unauthenticated("JWTs are not accepted")
		}
		return s.jwt.Verify(ctx, token)
	}
	return Identity{}, unauthenticated("unrecognized credential")
}

// looksLikeJWT reports whether token has three non-empty base64url parts
// separated by dots (the signature part may be empty only for alg none,
// which is refused later anyway).
func looksLikeJWT(token string) bool {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return false
	}
	for _, p := range parts {
		for i := 0; i < len(p); i++ {
			if !isBase64URL(p[i]) {
				return false
			}
		}
	}
	return true
}

func isBase64URL(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// unauthenticated returns ErrUnauthenticated with a reason. The reason
// must never hold the credential.
func unauthenticated(reason string) error {
	return fmt.Errorf("%w: %s", ErrUnauthenticated, reason)
}

// unavailable wraps err, a failure of the verifier's own dependencies,
// with ErrUnavailable.
func unavailable(what string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, what, err)
}
