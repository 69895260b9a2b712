package auth

import (
	"crypto/sha256"
	"fmt"
	"testing"
)

func TestVerifyCacheIsBoundedAndRevisioned(t *testing.T) {
	c := newVerifyCache(3)
	id := Identity{TenantID: "acme", Method: MethodAPIKey}
	for i := range 10 {
		c.put(sha256.Sum256(fmt.Appendf(nil, "key-%d", i)), 1, id)
		if c.len() > 3 {
			t.Fatalf("cache holds %d entries; bound is 3", c.len())
		}
	}
	sum := sha256.Sum256([]byte("key-9"))
	if got, ok := c.get(sum, 1); !ok || got != id {
		t.Errorf("latest entry missing: %+v, %v", got, ok)
	}
	if _, ok := c.get(sum, 2); ok {
		t.Error("entry served for another record revision")
	}
	c.put(sum, 2, id) // same key: replaces, evicts nothing
	if c.len() != 3 {
		t.Errorf("len = %d after replacing an entry; want 3", c.len())
	}
}

func TestPHCRoundTripAndDamage(t *testing.T) {
	h := hashSecret([]byte("s3cret"))
	if ok, err := checkSecret(h, []byte("s3cret")); !ok || err != nil {
		t.Fatalf("checkSecret(right) = %v, %v", ok, err)
	}
	if ok, err := checkSecret(h, []byte("s3cres")); ok || err != nil {
		t.Fatalf("checkSecret(wrong) = %v, %v", ok, err)
	}
	if h2 := hashSecret([]byte("s3cret")); h2 == h {
		t.Error("two hashes of one secret are equal: salt not random")
	}
	for _, bad := range []string{"", "$argon2i$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA",
		"$argon2id$v=19$m=99999999,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA",
		"$argon2id$v=19$m=19456,t=2,p=1$!!$aGFzaGhhc2hoYXNoaGFzaA"} {
		if _, err := checkSecret(bad, []byte("x")); err == nil {
			t.Errorf("checkSecret(%q) accepted a damaged hash", bad)
		}
	}
}
