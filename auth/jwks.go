package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/go-jose/go-jose/v4"
	json "github.com/go-json-experiment/json/v1"
)

const (
	maxJWKSSize = 1 << 20 // bytes
	minRSABits  = 2048
)

// errNoUsableKey marks a JWKS without any RS256 or ES256 signing key.
var errNoUsableKey = errors.New("auth: JWKS has no usable RS256 or ES256 key")

// fetchJWKS GETs the JWKS at url. Every failure wraps ErrUnavailable.
func fetchJWKS(ctx context.Context, client *http.Client, url string) ([]jose.JSONWebKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, unavailable("JWKS request", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, unavailable("fetch JWKS", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, unavailable("fetch JWKS", fmt.Errorf("HTTP status %s", resp.Status))
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSSize+1))
	if err != nil {
		return nil, unavailable("read JWKS", err)
	}
	if len(data) > maxJWKSSize {
		return nil, unavailable("read JWKS", fmt.Errorf("larger than %d bytes", maxJWKSSize))
	}
	keys, err := parseJWKS(data)
	if err != nil {
		return nil, unavailable("parse JWKS", err)
	}
	return keys, nil
}

// parseJWKS decodes a JWK set and keeps the public part of its RSA (at
// least 2048 bits) and P-256 ECDSA signing keys. Keys it cannot decode or
// use (other types, encryption keys, symmetric keys) are skipped; a set
// left with none is an error.
func parseJWKS(data []byte) ([]jose.JSONWebKey, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("auth: JWKS: %w", err)
	}
	var keys []jose.JSONWebKey
	for _, raw := range set.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil || (k.Use != "" && k.Use != "sig") {
			continue
		}
		if !k.IsPublic() {
			k = k.Public() // drops the private part; Key is nil for symmetric keys
		}
		if usable(k) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, errNoUsableKey
	}
	return keys, nil
}

// usable reports whether k is an RSA key of at least 2048 bits or a P-256
// ECDSA key, whose declared algorithm, if any, is RS256 or ES256.
func usable(k jose.JSONWebKey) bool {
	switch key := k.Key.(type) {
	case *rsa.PublicKey:
		return key.N.BitLen() >= minRSABits && (k.Algorithm == "" || k.Algorithm == string(jose.RS256))
	case *ecdsa.PublicKey:
		return key.Curve == elliptic.P256() && (k.Algorithm == "" || k.Algorithm == string(jose.ES256))
	}
	return false
}

// fits reports whether k can verify a signature made with alg.
func fits(k jose.JSONWebKey, alg jose.SignatureAlgorithm) bool {
	switch k.Key.(type) {
	case *rsa.PublicKey:
		return alg == jose.RS256
	case *ecdsa.PublicKey:
		return alg == jose.ES256
	}
	return false
}
