package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/kvcas"
)

const (
	// KeyBucket is the NATS KV bucket holding the API key records, one per
	// key id. It stores hashes, never secrets.
	KeyBucket = "tenant_keys"
	// KeyPrefix starts every API key: abk_<key id>_<secret>.
	KeyPrefix = "abk_"
)

// Key statuses reported by KeyRecord.Status.
const (
	StatusActive   = "active"
	StatusRevoked  = "revoked"
	StatusReplaced = "replaced"
)

const (
	keyIDBytes  = 6  // 12 hex characters
	secretBytes = 32 // 43 base64url characters
)

var (
	// ErrKeyNotFound marks a key id that is not in KeyBucket.
	ErrKeyNotFound = errors.New("auth: key not found")
	// ErrKeyRevoked marks an operation refused because the key is already
	// revoked or replaced.
	ErrKeyRevoked = errors.New("auth: key revoked")
	// ErrConflict marks a key record changed by someone else meanwhile;
	// the operation can be retried.
	ErrConflict = errors.New("auth: key record changed concurrently")
)

var (
	keyIDRE   = regexp.MustCompile(`^[0-9a-f]{12}$`)
	secretB64 = base64.RawURLEncoding
)

// KeyRecord describes an API key as stored, without its hash.
type KeyRecord struct {
	KeyID    string `json:"key_id"`
	TenantID string `json:"tenant_id"`
	// UserID is the user the key speaks for; "" when it binds none.
	UserID    string    `json:"user_id,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// RevokedAt is when the key was revoked or replaced; zero while it is
	// active.
	RevokedAt time.Time `json:"revoked_at,omitzero"`
	// ReplacedBy is the id of the key Rotate issued in its place.
	ReplacedBy string `json:"replaced_by,omitempty"`
}

// Status returns StatusActive, StatusRevoked or StatusReplaced.
func (r KeyRecord) Status() string {
	switch {
	case r.ReplacedBy != "":
		return StatusReplaced
	case !r.RevokedAt.IsZero():
		return StatusRevoked
	}
	return StatusActive
}

// storedKey is the JSON document under the key id in KeyBucket.
type storedKey struct {
	KeyRecord
	// Hash is the secret's keyed SHA-256 ($hmac-sha256$<sum>), or, for a
	// key issued before those, its argon2id PHC string.
	Hash string `json:"hash"`
}

// Keys issues, lists, rotates, revokes and verifies tenant API keys,
// stored hashed in KeyBucket. It is safe for concurrent use.
type Keys struct {
	kv      jetstream.KeyValue
	hashKey []byte // the HMAC key of the secrets' hashes (hashKeyEntry)
	hasher  *hasher
	cache   *verifyCache // argon2id keys only
	now     func() time.Time
}

var _ Verifier = (*Keys)(nil)

// KeyBucketConfig is the configuration of KeyBucket with replicas (0: as
// it is, or 1 when it is created).
func KeyBucketConfig(replicas int) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{Bucket: KeyBucket, Description: "agentbus tenant API keys (keyed hashes)",
		History: 1, Storage: jetstream.FileStorage, Replicas: replicas}
}

// NewKeys opens KeyBucket on js, creating it (file storage, history 1) if
// needed. It is idempotent and safe to call from several processes.
func NewKeys(ctx context.Context, js jetstream.JetStream) (*Keys, error) {
	if js == nil {
		return nil, errors.New("auth: nil JetStream")
	}
	kv, err := events.EnsureKeyValue(ctx, js, KeyBucketConfig(0))
	if err != nil {
		return nil, unavailable("bucket "+KeyBucket, err)
	}
	hashKey, err := loadHashKey(ctx, kv)
	if err != nil {
		return nil, err
	}
	return &Keys{
		kv:      kv,
		hashKey: hashKey,
		hasher:  newHasher(runtime.GOMAXPROCS(0)),
		cache:   newVerifyCache(defaultCacheSize),
		now:     time.Now,
	}, nil
}

// Create issues a key for tenantID, bound to userID unless it is "". It
// returns the key, to be shown once (only its hash is kept), and its
// record.
func (k *Keys) Create(ctx context.Context, tenantID, userID string) (string, KeyRecord, error) {
	if !ValidID(tenantID) {
		return "", KeyRecord{}, fmt.Errorf("%w: tenant %q", ErrInvalidID, tenantID)
	}
	if userID != "" && !ValidID(userID) {
		return "", KeyRecord{}, fmt.Errorf("%w: user %q", ErrInvalidID, userID)
	}
	secret := make([]byte, secretBytes)
	_, _ = rand.Read(secret)
	encoded := secretB64.EncodeToString(secret)
	hash := keyedHash(k.hashKey, encoded)
	for range 3 {
		rec := KeyRecord{KeyID: newKeyID(), TenantID: tenantID, UserID: userID, CreatedAt: k.now().UTC()}
		data, err := json.Marshal(storedKey{KeyRecord: rec, Hash: hash})
		if err != nil {
			return "", KeyRecord{}, err
		}
		_, err = k.kv.Create(ctx, rec.KeyID, data)
		if kvcas.IsConflict(err) {
			continue // key id collision: draw another
		}
		if err != nil {
			return "", KeyRecord{}, unavailable("store key", err)
		}
		return KeyPrefix + rec.KeyID + "_" + encoded, rec, nil
	}
	return "", KeyRecord{}, errors.New("auth: could not draw an unused key id")
}

// List returns the records of tenantID's keys, or of every tenant's when
// tenantID is "", oldest first. Records carry no hash.
func (k *Keys) List(ctx context.Context, tenantID string) ([]KeyRecord, error) {
	if tenantID != "" && !ValidID(tenantID) {
		return nil, fmt.Errorf("%w: tenant %q", ErrInvalidID, tenantID)
	}
	w, err := k.kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, unavailable("list keys", err)
	}
	defer func() { _ = w.Stop() }()
	var out []KeyRecord
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case e, ok := <-w.Updates():
			if !ok || e == nil { // nil: every current value has been delivered
				slices.SortFunc(out, func(a, b KeyRecord) int {
					if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
						return c
					}
					return strings.Compare(a.KeyID, b.KeyID)
				})
				return out, nil
			}
			if e.Key() == hashKeyEntry {
				continue
			}
			rec, err := decodeKey(e)
			if err != nil {
				return nil, err
			}
			if tenantID == "" || rec.TenantID == tenantID {
				out = append(out, rec.KeyRecord)
			}
		}
	}
}

// Rotate issues a new key for the tenant and user of keyID and marks
// keyID replaced by it, so keyID is refused from then on. It returns the
// new key, to be shown once, and its record.
func (k *Keys) Rotate(ctx context.Context, keyID string) (string, KeyRecord, error) {
	old, rev, err := k.get(ctx, keyID)
	if err != nil {
		return "", KeyRecord{}, err
	}
	if old.Status() != StatusActive {
		return "", KeyRecord{}, fmt.Errorf("%w: %s is %s", ErrKeyRevoked, keyID, old.Status())
	}
	key, rec, err := k.Create(ctx, old.TenantID, old.UserID)
	if err != nil {
		return "", KeyRecord{}, err
	}
	old.RevokedAt, old.ReplacedBy = k.now().UTC(), rec.KeyID
	if err := k.update(ctx, old, rev); err != nil {
		// Keyid stays active; withdraw its replacement rather than leave
		// two keys nobody asked for.
		_ = k.kv.Purge(context.WithoutCancel(ctx), rec.KeyID)
		return "", KeyRecord{}, err
	}
	return key, rec, nil
}

// Revoke marks keyID revoked, so it is refused from then on. Revoking a
// key that is already revoked or replaced is a no-op.
func (k *Keys) Revoke(ctx context.Context, keyID string) error {
	for range 3 {
		rec, rev, err := k.get(ctx, keyID)
		if err != nil {
			return err
		}
		if rec.Status() != StatusActive {
			return nil
		}
		rec.RevokedAt = k.now().UTC()
		err = k.update(ctx, rec, rev)
		if !errors.Is(err, ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("%w: %s", ErrConflict, keyID)
}

// Verify checks an API key (abk_<key id>_<secret>) and returns the
// identity it proves. The record is read on every call, so revocation and
// rotation take effect at once. The secret's keyed SHA-256 is compared in
// constant time; a key issued before those, hashed with argon2id, is
// checked with argon2id, which is skipped when the same key already passed
// it against the same record revision.
func (k *Keys) Verify(ctx context.Context, token string) (Identity, error) {
	keyID, secret, ok := parseKey(token)
	if !ok {
		return Identity{}, unauthenticated("malformed API key")
	}
	entry, err := k.kv.Get(ctx, keyID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Identity{}, unauthenticated("unknown API key " + keyID)
	}
	if err != nil {
		return Identity{}, unavailable("read key "+keyID, err)
	}
	rec, err := decodeKey(entry)
	if err != nil {
		return Identity{}, err
	}
	sum := sha256.Sum256([]byte(token))
	if st := rec.Status(); st != StatusActive {
		k.cache.drop(sum)
		return Identity{}, unauthenticated("API key " + keyID + " is " + st)
	}
	id := Identity{TenantID: rec.TenantID, UserID: rec.UserID, Method: MethodAPIKey, KeyID: keyID}
	if want, ok := strings.CutPrefix(rec.Hash, hmacPrefix); ok {
		got := secretB64.EncodeToString(keyedSum(k.hashKey, secret))
		if subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
			return Identity{}, unauthenticated("wrong secret for API key " + keyID)
		}
		return id, nil
	}
	if cached, ok := k.cache.get(sum, entry.Revision()); ok {
		return cached, nil
	}
	match, err := k.hasher.check(ctx, rec.Hash, []byte(secret))
	if err != nil {
		return Identity{}, fmt.Errorf("auth: key %s: %w", keyID, err)
	}
	if !match {
		return Identity{}, unauthenticated("wrong secret for API key " + keyID)
	}
	k.cache.put(sum, entry.Revision(), id)
	return id, nil
}

// hashKeyEntry is the KeyBucket entry holding the HMAC key of the secrets'
// hashes, drawn by the first process that opens the bucket. It is not a
// key id (those are 12 hex digits), so it never collides with one.
const hashKeyEntry = "hash-key"

// hmacPrefix starts a keyed hash: $hmac-sha256$<base64url of the sum>.
const hmacPrefix = "$hmac-sha256$"

// loadHashKey reads the bucket's HMAC key, drawing and storing one if
// there is none yet; of processes racing to store it, the first wins and
// the others read its key.
func loadHashKey(ctx context.Context, kv jetstream.KeyValue) ([]byte, error) {
	for range 3 {
		e, err := kv.Get(ctx, hashKeyEntry)
		if err == nil {
			key, err := secretB64.DecodeString(string(e.Value()))
			if err != nil || len(key) < sha256.Size {
				return nil, fmt.Errorf("auth: %s entry of %s is damaged", hashKeyEntry, KeyBucket)
			}
			return key, nil
		}
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, unavailable("read "+hashKeyEntry, err)
		}
		key := make([]byte, sha256.Size)
		_, _ = rand.Read(key)
		_, err = kv.Create(ctx, hashKeyEntry, []byte(secretB64.EncodeToString(key)))
		if err == nil {
			return key, nil
		}
		if !kvcas.IsConflict(err) {
			return nil, unavailable("store "+hashKeyEntry, err)
		}
	}
	return nil, fmt.Errorf("auth: %s entry of %s keeps changing", hashKeyEntry, KeyBucket)
}

// keyedSum is HMAC-SHA256 of the encoded secret under key. The secrets are
// 256 random bits, so a fast hash is as strong as a password hash here
// (nothing to guess); with the key, a record copied without the bucket's
// hash-key entry cannot even confirm a guess.
func keyedSum(key []byte, secret string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(secret))
	return m.Sum(nil)
}

// keyedHash is the stored form of keyedSum.
func keyedHash(key []byte, secret string) string {
	return hmacPrefix + secretB64.EncodeToString(keyedSum(key, secret))
}

// get reads the stored record of keyID and its revision.
func (k *Keys) get(ctx context.Context, keyID string) (storedKey, uint64, error) {
	if !keyIDRE.MatchString(keyID) {
		return storedKey{}, 0, fmt.Errorf("%w: %q is not a key id (12 hex digits)", ErrKeyNotFound, keyID)
	}
	entry, err := k.kv.Get(ctx, keyID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return storedKey{}, 0, fmt.Errorf("%w: %s", ErrKeyNotFound, keyID)
	}
	if err != nil {
		return storedKey{}, 0, unavailable("read key "+keyID, err)
	}
	rec, err := decodeKey(entry)
	if err != nil {
		return storedKey{}, 0, err
	}
	return rec, entry.Revision(), nil
}

// update stores rec over revision rev; ErrConflict when the record
// changed since rev was read.
func (k *Keys) update(ctx context.Context, rec storedKey, rev uint64) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	_, err = k.kv.Update(ctx, rec.KeyID, data, rev)
	if kvcas.IsConflict(err) {
		return fmt.Errorf("%w: %s", ErrConflict, rec.KeyID)
	}
	if err != nil {
		return unavailable("store key "+rec.KeyID, err)
	}
	return nil
}

// decodeKey decodes a KeyBucket entry.
func decodeKey(e jetstream.KeyValueEntry) (storedKey, error) {
	var rec storedKey
	if err := json.Unmarshal(e.Value(), &rec); err != nil || rec.KeyID != e.Key() {
		return storedKey{}, fmt.Errorf("auth: key record %s is damaged", e.Key())
	}
	return rec, nil
}

// parseKey splits abk_<key id>_<secret>, checking the shape of both.
func parseKey(token string) (keyID, secret string, ok bool) {
	rest, ok := strings.CutPrefix(token, KeyPrefix)
	if !ok {
		return "", "", false
	}
	keyID, secret, ok = strings.Cut(rest, "_")
	if !ok || !keyIDRE.MatchString(keyID) || len(secret) != secretB64.EncodedLen(secretBytes) {
		return "", "", false
	}
	if _, err := secretB64.DecodeString(secret); err != nil {
		return "", "", false
	}
	return keyID, secret, true
}

// newKeyID draws a random key id of 12 lowercase hex digits.
func newKeyID() string {
	b := make([]byte, keyIDBytes)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
