package auth

import "time"

// SetClock makes j read the time from now.
func SetClock(j *JWT, now func() time.Time) { j.now = now }

// CacheLen returns the number of verified keys k remembers.
func CacheLen(k *Keys) int { return k.cache.len() }
