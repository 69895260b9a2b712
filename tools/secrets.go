package tools

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// KeyLen is the length of the secrets key: AES-256.
const KeyLen = 32

// Errors of the secret store.
var (
	// ErrNoSecretsKey reports a store without a key: webhook tools cannot
	// be created or called.
	ErrNoSecretsKey = errors.New("tools: no secrets key configured (SECRETS_KEY)")
	// ErrSecretNotFound reports a tool whose secret is not stored.
	ErrSecretNotFound = errors.New("tools: webhook secret not found")
)

// ParseKey decodes a base64 (standard or URL, padded or not) 32-byte key.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil && len(k) == KeyLen {
			return k, nil
		}
	}
	return nil, fmt.Errorf("tools: the secrets key must be %d bytes in base64", KeyLen)
}

// LoadOrCreateKey reads the base64 key in path, or writes a new random
// one there with mode 0600 (the all-in-one's data directory).
func LoadOrCreateKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		return ParseKey(string(b))
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("tools: read secrets key: %w", err)
	}
	k := make([]byte, KeyLen)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("tools: secrets key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) { // another process wrote it first
		return LoadOrCreateKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("tools: write secrets key: %w", err)
	}
	_, err = f.WriteString(base64.StdEncoding.EncodeToString(k) + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("tools: write secrets key: %w", err)
	}
	return k, nil
}

// Secrets keeps webhook secrets in a KV bucket (handlers.BucketToolSecrets)
// keyed <tenant>.<tool_id>, sealed with
// AES-256-GCM under the configured key; each sealed value is bound to its
// tenant and tool (the additional data), so one cannot be moved to
// another tool. A Secrets without a key refuses every write and read.
type Secrets struct {
	KV   jetstream.KeyValue
	aead cipher.AEAD
}

// NewSecrets returns the store; key nil or empty makes it refuse every
// operation with ErrNoSecretsKey.
func NewSecrets(kv jetstream.KeyValue, key []byte) (*Secrets, error) {
	s := &Secrets{KV: kv}
	if len(key) == 0 {
		return s, nil
	}
	if len(key) != KeyLen {
		return nil, fmt.Errorf("tools: the secrets key has %d bytes, not %d", len(key), KeyLen)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	if s.aead, err = cipher.NewGCM(block); err != nil {
		return nil, err
	}
	return s, nil
}

// Ready reports whether secrets can be stored: a key is configured.
func (s *Secrets) Ready() bool { return s != nil && s.aead != nil }

func secretKey(tenant, toolID string) string { return tenant + "." + toolID }

// Put seals and stores the secret of a tenant's tool.
func (s *Secrets) Put(ctx context.Context, tenant, toolID, secret string) error {
	if !s.Ready() {
		return ErrNoSecretsKey
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return err
	}
	sealed := s.aead.Seal(nonce, nonce, []byte(secret), []byte(secretKey(tenant, toolID)))
	if _, err := s.KV.Put(ctx, secretKey(tenant, toolID), sealed); err != nil {
		return fmt.Errorf("tools: store secret: %w", err)
	}
	return nil
}

// Get returns the secret of a tenant's tool.
func (s *Secrets) Get(ctx context.Context, tenant, toolID string) ([]byte, error) {
	if !s.Ready() {
		return nil, ErrNoSecretsKey
	}
	e, err := s.KV.Get(ctx, secretKey(tenant, toolID))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, ErrSecretNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("tools: read secret: %w", err)
	}
	v := e.Value()
	n := s.aead.NonceSize()
	if len(v) < n {
		return nil, fmt.Errorf("tools: secret of %s is corrupt", toolID)
	}
	plain, err := s.aead.Open(nil, v[:n], v[n:], []byte(secretKey(tenant, toolID)))
	if err != nil {
		return nil, fmt.Errorf("tools: secret of %s cannot be opened (another key?)", toolID)
	}
	return plain, nil
}

// Delete removes the secret of a tenant's tool; a missing one is fine.
func (s *Secrets) Delete(ctx context.Context, tenant, toolID string) error {
	if s == nil || s.KV == nil {
		return nil
	}
	err := s.KV.Purge(ctx, secretKey(tenant, toolID))
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("tools: delete secret: %w", err)
	}
	return nil
}
