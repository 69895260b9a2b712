package auth_test

import (
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentbus/agentbus/auth"
)

// FuzzCredential: whatever a client puts in its Authorization header, the
// verifier (API keys on a real key bucket, JWTs under a development HS256
// secret) answers with the identity the credential proves or with
// ErrUnauthenticated, never panics, and never repeats the credential's
// secret in its error (errors reach logs and HTTP answers).
func FuzzCredential(f *testing.F) {
	keys, _, _ := newKeys(f)
	key, _, err := keys.Create(f.Context(), "acme", "alice")
	if err != nil {
		f.Fatal(err)
	}
	// A secret of this process only: a token the fuzzer kept from an
	// earlier run was never issued here and must not verify.
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	j, err := auth.NewJWT(f.Context(), auth.JWTConfig{HS256Secret: secret})
	if err != nil {
		f.Fatal(err)
	}
	v := auth.Select(keys, j)
	tok := sign(f, "HS256", secret, "", claims("acme", time.Hour))
	for _, s := range []string{key, key[:len(key)-1] + "A", strings.Replace(key, "_", "-", 2), "abk_", "abk__",
		tok, tok[:len(tok)-2], unsigned("none", "", claims("acme", time.Hour)), "a.b.c", "..", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cred string) {
		id, err := v.Verify(t.Context(), cred)
		if err != nil {
			if !errors.Is(err, auth.ErrUnauthenticated) {
				t.Fatalf("refusal is not ErrUnauthenticated: %v", err)
			}
			if secret := secretOf(cred); len(secret) >= 16 && strings.Contains(err.Error(), secret) {
				t.Fatalf("the error repeats the credential's secret: %v", err)
			}
			return
		}
		if id.TenantID != "acme" {
			t.Fatalf("accepted %q as %+v", cred, id)
		}
		if cred != key && cred != tok {
			t.Fatalf("accepted a credential never issued: %q as %+v", cred, id)
		}
	})
}

// secretOf is the part of a credential that must stay secret: an API key's
// secret, a JWT's signature.
func secretOf(cred string) string {
	if rest, ok := strings.CutPrefix(cred, auth.KeyPrefix); ok {
		_, secret, _ := strings.Cut(rest, "_")
		return secret
	}
	if i := strings.LastIndexByte(cred, '.'); i >= 0 {
		return cred[i+1:]
	}
	return ""
}
