package auth

import (
	"crypto/sha256"
	"sync"
)

// defaultCacheSize bounds the verified-key cache.
const defaultCacheSize = 10_000

// verifyCache remembers API keys whose argon2id check passed, keyed by the
// SHA-256 of the full key and valid only for the KV revision of the record
// that was checked: any change to the record (revocation, rotation)
// changes the revision and so invalidates the entry.
type verifyCache struct {
	mu      sync.Mutex
	max     int
	entries map[[sha256.Size]byte]cacheEntry
}

type cacheEntry struct {
	revision uint64
	id       Identity
}

func newVerifyCache(size int) *verifyCache {
	return &verifyCache{max: size, entries: make(map[[sha256.Size]byte]cacheEntry)}
}

// get returns the identity cached for sum at revision rev.
func (c *verifyCache) get(sum [sha256.Size]byte, rev uint64) (Identity, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[sum]
	if !ok || e.revision != rev {
		return Identity{}, false
	}
	return e.id, true
}

// put caches id for sum at revision rev, dropping an arbitrary entry when
// the cache is full.
func (c *verifyCache) put(sum [sha256.Size]byte, rev uint64, id Identity) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[sum]; !ok && len(c.entries) >= c.max {
		for k := range c.entries {
			delete(c.entries, k)
			break
		}
	}
	c.entries[sum] = cacheEntry{revision: rev, id: id}
}

// drop forgets sum.
func (c *verifyCache) drop(sum [sha256.Size]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, sum)
}

// len returns the number of cached entries.
func (c *verifyCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
