package auth

import (
	"context"
	"time"

	json "github.com/go-json-experiment/json/v1"
)

// SetClock makes j read the time from now.
func SetClock(j *JWT, now func() time.Time) { j.now = now }

// CacheLen returns the number of verified keys k remembers.
func CacheLen(k *Keys) int { return k.cache.len() }

// PutArgonKey stores a key for tenant as keys were stored before keyed
// hashes (its secret hashed with argon2id) and returns it.
func PutArgonKey(ctx context.Context, k *Keys, keyID, tenant string) (string, error) {
	secret := secretB64.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	data, err := json.Marshal(storedKey{KeyRecord: KeyRecord{KeyID: keyID, TenantID: tenant, CreatedAt: time.Now().UTC()},
		Hash: hashSecret([]byte(secret))})
	if err != nil {
		return "", err
	}
	if _, err := k.kv.Create(ctx, keyID, data); err != nil {
		return "", err
	}
	return KeyPrefix + keyID + "_" + secret, nil
}
