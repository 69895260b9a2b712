package auth_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/auth"
	"github.com/agentbus/agentbus/events/eventstest"
)

// newKeys starts a real in-process nats-server and opens the key bucket.
func newKeys(t testing.TB) (*auth.Keys, jetstream.JetStream, *server.Server) {
	t.Helper()
	s := eventstest.Server(t)
	_, js := eventstest.Connect(t, s)
	keys, err := auth.NewKeys(t.Context(), js)
	if err != nil {
		t.Fatal(err)
	}
	return keys, js, s
}

func mustCreate(t *testing.T, keys *auth.Keys, tenant, user string) (string, auth.KeyRecord) {
	t.Helper()
	key, rec, err := keys.Create(t.Context(), tenant, user)
	if err != nil {
		t.Fatalf("Create(%q, %q): %v", tenant, user, err)
	}
	return key, rec
}

// refused asserts that token is refused with ErrUnauthenticated and that
// the error does not repeat its secret.
func refused(t *testing.T, v auth.Verifier, token string) {
	t.Helper()
	id, err := v.Verify(t.Context(), token)
	if !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("Verify = %+v, %v; want ErrUnauthenticated", id, err)
	}
	t.Logf("refused: %v", err)
	if i := strings.LastIndexByte(token, '_'); i >= 0 && len(token)-i > 8 && strings.Contains(err.Error(), token[i+1:]) {
		t.Errorf("error %q contains the secret", err)
	}
	if len(token) > 20 && strings.Contains(err.Error(), token) {
		t.Errorf("error %q contains the credential", err)
	}
}

var keyRE = regexp.MustCompile(`^abk_[0-9a-f]{12}_[A-Za-z0-9_-]{43}$`)

func TestKeyLifecycle(t *testing.T) {
	keys, js, _ := newKeys(t)
	ctx := t.Context()
	if _, err := auth.NewKeys(ctx, js); err != nil {
		t.Fatalf("second NewKeys: %v", err)
	}
	key, rec := mustCreate(t, keys, "acme", "alice")
	if !keyRE.MatchString(key) || !strings.HasPrefix(key, auth.KeyPrefix+rec.KeyID+"_") {
		t.Fatalf("key %q does not have the form abk_<id>_<secret> with id %s", key, rec.KeyID)
	}
	if rec.TenantID != "acme" || rec.UserID != "alice" || rec.CreatedAt.IsZero() || rec.Status() != auth.StatusActive {
		t.Fatalf("record = %+v", rec)
	}
	id, err := keys.Verify(ctx, key)
	want := auth.Identity{TenantID: "acme", UserID: "alice", Method: auth.MethodAPIKey, KeyID: rec.KeyID}
	if err != nil || id != want {
		t.Fatalf("Verify = %+v, %v; want %+v", id, err, want)
	}

	newKey, newRec, err := keys.Rotate(ctx, rec.KeyID)
	if err != nil {
		t.Fatalf("Rotate: %v", err)
	}
	if newRec.KeyID == rec.KeyID || newRec.TenantID != "acme" || newRec.UserID != "alice" || newKey == key {
		t.Fatalf("rotated record = %+v", newRec)
	}
	refused(t, keys, key)
	id, err = keys.Verify(ctx, newKey)
	if want.KeyID = newRec.KeyID; err != nil || id != want {
		t.Fatalf("Verify(rotated) = %+v, %v; want %+v", id, err, want)
	}
	if _, _, err := keys.Rotate(ctx, rec.KeyID); !errors.Is(err, auth.ErrKeyRevoked) {
		t.Errorf("Rotate(replaced key) = %v; want ErrKeyRevoked", err)
	}

	list, err := keys.List(ctx, "acme")
	if err != nil || len(list) != 2 {
		t.Fatalf("List = %+v, %v; want 2 records", list, err)
	}
	if list[0].KeyID != rec.KeyID || list[0].Status() != auth.StatusReplaced || list[0].ReplacedBy != newRec.KeyID || list[0].RevokedAt.IsZero() {
		t.Errorf("old record = %+v", list[0])
	}
	if list[1].KeyID != newRec.KeyID || list[1].Status() != auth.StatusActive {
		t.Errorf("new record = %+v", list[1])
	}

	if err := keys.Revoke(ctx, newRec.KeyID); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	refused(t, keys, newKey)
	if err := keys.Revoke(ctx, newRec.KeyID); err != nil {
		t.Errorf("second Revoke = %v; want nil", err)
	}
	list, _ = keys.List(ctx, "")
	if len(list) != 2 || list[1].Status() != auth.StatusRevoked {
		t.Errorf("after revoke: %+v", list)
	}
	for _, op := range []func(string) error{
		func(id string) error { _, _, err := keys.Rotate(ctx, id); return err },
		func(id string) error { return keys.Revoke(ctx, id) },
	} {
		for _, id := range []string{"0123456789ab", "nope", ""} {
			if err := op(id); !errors.Is(err, auth.ErrKeyNotFound) {
				t.Errorf("unknown key %q: %v; want ErrKeyNotFound", id, err)
			}
		}
	}
}

func TestKeyRecordHoldsNoSecret(t *testing.T) {
	keys, js, _ := newKeys(t)
	key, rec := mustCreate(t, keys, "acme", "")
	secret := key[len(auth.KeyPrefix+rec.KeyID+"_"):]
	rawSecret, err := base64.RawURLEncoding.DecodeString(secret)
	if err != nil || len(rawSecret) != 32 {
		t.Fatalf("secret %d bytes, %v", len(rawSecret), err)
	}
	kv, err := js.KeyValue(t.Context(), auth.KeyBucket)
	if err != nil {
		t.Fatal(err)
	}
	entry, err := kv.Get(t.Context(), rec.KeyID)
	if err != nil {
		t.Fatal(err)
	}
	raw := entry.Value()
	for _, s := range [][]byte{[]byte(key), []byte(secret), rawSecret, []byte(secret[:16])} {
		if bytes.Contains(raw, s) {
			t.Fatalf("stored record %s contains the key or its secret", raw)
		}
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	hash, _ := doc["hash"].(string)
	if !strings.HasPrefix(hash, "$hmac-sha256$") || len(hash) != len("$hmac-sha256$")+43 || doc["key_id"] != rec.KeyID || doc["tenant_id"] != "acme" {
		t.Errorf("stored record = %s", raw)
	}
	if _, ok := doc["user_id"]; ok {
		t.Errorf("record without user stores user_id: %s", raw)
	}
	st, err := kv.Status(t.Context())
	if err != nil || st.History() != 1 {
		t.Errorf("bucket history = %v, %v; want 1", st, err)
	}
	if info := st.(*jetstream.KeyValueBucketStatus).StreamInfo(); info.Config.Storage != jetstream.FileStorage {
		t.Errorf("bucket storage = %v; want file", info.Config.Storage)
	}
}

func TestListHidesHash(t *testing.T) {
	keys, _, _ := newKeys(t)
	mustCreate(t, keys, "acme", "alice")
	mustCreate(t, keys, "globex", "")
	all, err := keys.List(t.Context(), "")
	if err != nil || len(all) != 2 {
		t.Fatalf("List(all) = %+v, %v", all, err)
	}
	data, _ := json.Marshal(all)
	if bytes.Contains(data, []byte("hash")) || bytes.Contains(data, []byte("argon2")) {
		t.Errorf("List exposes the hash: %s", data)
	}
	only, err := keys.List(t.Context(), "globex")
	if err != nil || len(only) != 1 || only[0].TenantID != "globex" {
		t.Errorf("List(globex) = %+v, %v", only, err)
	}
	if none, err := keys.List(t.Context(), "initech"); err != nil || len(none) != 0 {
		t.Errorf("List(initech) = %+v, %v", none, err)
	}
	if _, err := keys.List(t.Context(), "a.*"); !errors.Is(err, auth.ErrInvalidID) {
		t.Errorf("List(a.*) = %v; want ErrInvalidID", err)
	}
}

func TestWrongAndMalformedKeysRefused(t *testing.T) {
	keys, _, _ := newKeys(t)
	key, rec := mustCreate(t, keys, "acme", "alice")
	other := base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	secret := key[len(auth.KeyPrefix+rec.KeyID+"_"):]
	for name, token := range map[string]string{
		"wrong secret":     auth.KeyPrefix + rec.KeyID + "_" + other,
		"unknown id":       auth.KeyPrefix + "0123456789ab_" + secret,
		"empty":            "",
		"prefix only":      auth.KeyPrefix,
		"no secret":        auth.KeyPrefix + rec.KeyID + "_",
		"short secret":     key[:len(key)-1],
		"long secret":      key + "A",
		"bad id":           auth.KeyPrefix + "ZZZZZZZZZZZZ_" + secret,
		"wildcard id":      auth.KeyPrefix + "*_" + secret,
		"not base64":       auth.KeyPrefix + rec.KeyID + "_" + strings.Repeat("!", 43),
		"no prefix":        strings.TrimPrefix(key, auth.KeyPrefix),
		"bearer kept":      "Bearer " + key,
		"trailing newline": key + "\n",
	} {
		t.Run(name, func(t *testing.T) { refused(t, keys, token) })
	}
}

// TestArgonKeyKeepsWorkingUntilRotated: a key stored before keyed hashes
// (argon2id) still verifies, through the cache after its first check; a
// revoked one is refused at once; rotating one issues a keyed-hash key.
func TestArgonKeyKeepsWorkingUntilRotated(t *testing.T) {
	keys, _, _ := newKeys(t)
	key, err := auth.PutArgonKey(t.Context(), keys, "00000000a1a1", "acme")
	if err != nil {
		t.Fatal(err)
	}
	rec := auth.KeyRecord{KeyID: "00000000a1a1"}
	for range 2 {
		if _, err := keys.Verify(t.Context(), key); err != nil {
			t.Fatal(err)
		}
	}
	if n := auth.CacheLen(keys); n != 1 {
		t.Fatalf("cache holds %d entries; want 1", n)
	}
	start := time.Now()
	for range 20 {
		if _, err := keys.Verify(t.Context(), key); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("20 cached verifications: %v", time.Since(start))
	if err := keys.Revoke(t.Context(), rec.KeyID); err != nil {
		t.Fatal(err)
	}
	refused(t, keys, key)

	old, err := auth.PutArgonKey(t.Context(), keys, "00000000b2b2", "acme")
	if err != nil {
		t.Fatal(err)
	}
	if id, err := keys.Verify(t.Context(), old); err != nil || id.TenantID != "acme" {
		t.Fatalf("argon2id key: %+v, %v", id, err)
	}
	rotated, _, err := keys.Rotate(t.Context(), "00000000b2b2")
	if err != nil {
		t.Fatal(err)
	}
	refused(t, keys, old)
	if id, err := keys.Verify(t.Context(), rotated); err != nil || id.TenantID != "acme" {
		t.Fatalf("rotated key: %+v, %v", id, err)
	}
	// Revocation and replacement dropped both argon2id keys from the
	// cache, and a keyed-hash key is never cached.
	if n := auth.CacheLen(keys); n != 0 {
		t.Errorf("cache holds %d entries; want none", n)
	}
}

// TestHashKeySharedByProcesses: every process that opens the bucket uses
// the one HMAC key the first drew, so a key issued by one verifies in
// another, and the key's entry is not listed as an API key.
func TestHashKeySharedByProcesses(t *testing.T) {
	keys, js, _ := newKeys(t)
	key, _ := mustCreate(t, keys, "acme", "alice")
	other, err := auth.NewKeys(t.Context(), js)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := other.Verify(t.Context(), key); err != nil || id.UserID != "alice" {
		t.Fatalf("verified by another process: %+v, %v", id, err)
	}
	if recs, err := other.List(t.Context(), ""); err != nil || len(recs) != 1 {
		t.Fatalf("List = %+v, %v", recs, err)
	}
}

func TestCreateRefusesBadIDs(t *testing.T) {
	keys, _, _ := newKeys(t)
	for _, ids := range [][2]string{
		{"", ""}, {"a.b", ""}, {"a*", ""}, {">", ""}, {"a b", ""}, {strings.Repeat("t", 65), ""},
		{"acme", "bob.smith"}, {"acme", "*"}, {"acme", "x>"}, {"acme", "a/b"},
	} {
		if _, _, err := keys.Create(t.Context(), ids[0], ids[1]); !errors.Is(err, auth.ErrInvalidID) {
			t.Errorf("Create(%q, %q) = %v; want ErrInvalidID", ids[0], ids[1], err)
		}
	}
}

// TestUnavailableIsNotUnauthenticated: with NATS down, Verify fails with
// ErrUnavailable, not ErrUnauthenticated, so the caller can answer 503.
func TestUnavailableIsNotUnauthenticated(t *testing.T) {
	keys, _, s := newKeys(t)
	key, _ := mustCreate(t, keys, "acme", "")
	s.Shutdown()
	s.WaitForShutdown()
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	_, err := keys.Verify(ctx, key)
	if err == nil || errors.Is(err, auth.ErrUnauthenticated) || !errors.Is(err, auth.ErrUnavailable) {
		t.Fatalf("Verify with NATS down = %v; want ErrUnavailable", err)
	}
}

func TestSelectRoutesByShape(t *testing.T) {
	keys, _, _ := newKeys(t)
	key, _ := mustCreate(t, keys, "acme", "")
	j, err := auth.NewJWT(t.Context(), auth.JWTConfig{HS256Secret: hmacSecret})
	if err != nil {
		t.Fatal(err)
	}
	jwtToken := sign(t, "HS256", hmacSecret, "", claims("acme", time.Hour))

	both := auth.Select(keys, j)
	if id, err := both.Verify(t.Context(), key); err != nil || id.Method != auth.MethodAPIKey {
		t.Errorf("key via Select = %+v, %v", id, err)
	}
	if id, err := both.Verify(t.Context(), jwtToken); err != nil || id.Method != auth.MethodJWT || id.TenantID != "acme" {
		t.Errorf("JWT via Select = %+v, %v", id, err)
	}
	refused(t, auth.Select(nil, j), key)
	refused(t, auth.Select(keys, nil), jwtToken)
	refused(t, auth.Select(nil, nil), key)
	for _, garbage := range []string{"", "x", "a.b", "a.b.c.d", "a.b!.c", strings.Repeat("a", 20<<10)} {
		refused(t, both, garbage)
	}
}

func TestConcurrentVerify(t *testing.T) {
	keys, _, _ := newKeys(t)
	a, _ := mustCreate(t, keys, "acme", "")
	b, _ := mustCreate(t, keys, "globex", "bob")
	errs := make(chan error, 16)
	for i := range 16 {
		go func() {
			token, tenant := a, "acme"
			if i%2 == 1 {
				token, tenant = b, "globex"
			}
			id, err := keys.Verify(t.Context(), token)
			if err == nil && id.TenantID != tenant {
				err = errors.New("wrong tenant " + id.TenantID)
			}
			errs <- err
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// BenchmarkVerify is the cost of checking an API key on a request whose
// key was not checked before (no cache): a keyed-hash key against one
// stored with argon2id. Both include the record's read from a real bucket.
func BenchmarkVerify(b *testing.B) {
	keys, _, _ := newKeys(b)
	keyed, _, err := keys.Create(b.Context(), "acme", "")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("keyed-sha256", func(b *testing.B) {
		for b.Loop() {
			if _, err := keys.Verify(b.Context(), keyed); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("argon2id", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			// A fresh key each time: the cache would answer a second check.
			b.StopTimer()
			key, err := auth.PutArgonKey(b.Context(), keys, fmt.Sprintf("%012x", i), "acme")
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if _, err := keys.Verify(b.Context(), key); err != nil {
				b.Fatal(err)
			}
		}
	})
}
