package auth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"
)

// Argon2id parameters of the key hashes stored before keyed SHA-256 (see
// keyedHash; the OWASP minimum for argon2id: 19 MiB, 2 passes, 1 lane).
// Such keys verify until they are rotated; verification reads the
// parameters from the stored hash. New hashes are made only by tests.
const (
	argonTime    = 2
	argonMemory  = 19 * 1024 // KiB
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16
)

// errBadHash marks a stored hash that cannot be parsed.
var errBadHash = errors.New("auth: malformed argon2id hash")

var phcB64 = base64.RawStdEncoding

// hashSecret returns the argon2id hash of secret as a PHC string:
// $argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>, with a random salt.
func hashSecret(secret []byte) string {
	salt := make([]byte, argonSaltLen)
	_, _ = rand.Read(salt) // crypto/rand.Read never fails
	sum := argon2.IDKey(secret, salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, argonMemory, argonTime, argonThreads, phcB64.EncodeToString(salt), phcB64.EncodeToString(sum))
}

// checkSecret reports whether secret matches the PHC string phc, comparing
// in constant time.
func checkSecret(phc string, secret []byte) (bool, error) {
	p, err := parsePHC(phc)
	if err != nil {
		return false, err
	}
	sum := argon2.IDKey(secret, p.salt, p.time, p.memory, p.threads, uint32(len(p.sum)))
	return subtle.ConstantTimeCompare(sum, p.sum) == 1, nil
}

type phcHash struct {
	time, memory uint32
	threads      uint8
	salt, sum    []byte
}

// parsePHC parses an argon2id PHC string, refusing parameters outside
// sane bounds so a damaged record cannot make verification hog memory.
func parsePHC(s string) (phcHash, error) {
	parts := strings.Split(s, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" || parts[2] != fmt.Sprintf("v=%d", argon2.Version) {
		return phcHash{}, errBadHash
	}
	var p phcHash
	var threads uint32
	if n, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.memory, &p.time, &threads); err != nil || n != 3 {
		return phcHash{}, errBadHash
	}
	if p.memory < 8 || p.memory > 1<<20 || p.time < 1 || p.time > 16 || threads < 1 || threads > 16 {
		return phcHash{}, errBadHash
	}
	p.threads = uint8(threads)
	var err error
	if p.salt, err = phcB64.DecodeString(parts[4]); err != nil || len(p.salt) < 8 {
		return phcHash{}, errBadHash
	}
	if p.sum, err = phcB64.DecodeString(parts[5]); err != nil || len(p.sum) < 16 || len(p.sum) > 64 {
		return phcHash{}, errBadHash
	}
	return p, nil
}

// hasher runs argon2id computations, at most cap(slots) at a time: each
// takes ~19 MiB, so a burst of requests with wrong secrets cannot
// exhaust memory.
type hasher struct {
	slots chan struct{}
}

func newHasher(n int) *hasher { return &hasher{slots: make(chan struct{}, max(n, 1))} }

// check is checkSecret run in a slot; it gives up when ctx ends first.
func (h *hasher) check(ctx context.Context, phc string, secret []byte) (bool, error) {
	select {
	case h.slots <- struct{}{}:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	defer func() { <-h.slots }()
	return checkSecret(phc, secret)
}
