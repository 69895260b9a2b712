package agents

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Webhook signing (the receiver's side is VerifyWebhook). A webhook tool
// call is a POST of a JSON body with these headers:
//
//	X-Agentbus-Timestamp: <unix seconds>
//	X-Agentbus-Signature: v1=<hex HMAC-SHA256(secret, timestamp + "." + body)>
//	Idempotency-Key: <the call's id, the same on every retry>
const (
	HeaderWebhookTimestamp = "X-Agentbus-Timestamp"
	HeaderWebhookSignature = "X-Agentbus-Signature"
	HeaderIdempotencyKey   = "Idempotency-Key"
	// DefaultReplayWindow is how old (or how far ahead) a timestamp the
	// receiver accepts by default.
	DefaultReplayWindow = 5 * time.Minute
)

// Webhook verification errors.
var (
	// ErrWebhookSignature reports a missing or wrong signature.
	ErrWebhookSignature = errors.New("agents: webhook signature does not match")
	// ErrWebhookTimestamp reports a missing timestamp, or one outside the
	// replay window.
	ErrWebhookTimestamp = errors.New("agents: webhook timestamp outside the replay window")
	// ErrWebhookReplay reports a signed request seen before.
	ErrWebhookReplay = errors.New("agents: webhook request replayed")
)

// SignWebhook returns the signature header value of body sent at
// timestamp ts (unix seconds) with secret.
func SignWebhook(secret []byte, ts int64, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(strconv.FormatInt(ts, 10)))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "v1=" + hex.EncodeToString(mac.Sum(nil))
}

// ReplayGuard remembers the signatures of accepted requests for a window,
// so a receiver refuses a request sent twice.
type ReplayGuard struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

// Seen records sig at now and reports whether it was recorded before
// within window; entries older than window are forgotten.
func (g *ReplayGuard) Seen(sig string, now time.Time, window time.Duration) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen == nil {
		g.seen = map[string]time.Time{}
	}
	for s, at := range g.seen {
		if now.Sub(at) > 2*window {
			delete(g.seen, s)
		}
	}
	if _, ok := g.seen[sig]; ok {
		return true
	}
	g.seen[sig] = now
	return false
}

// VerifyWebhook is what a tenant's receiver runs on each call: it checks
// the signature of body against the timestamp and signature headers with
// the tool's secret, refuses a timestamp further than window (default
// DefaultReplayWindow) from now, and, with a guard, a request it has
// accepted before. Each signature value is compared in constant time.
func VerifyWebhook(secret []byte, timestamp, signature string, body []byte, now time.Time, window time.Duration, guard *ReplayGuard) error {
	if window <= 0 {
		window = DefaultReplayWindow
	}
	ts, err := strconv.ParseInt(strings.TrimSpace(timestamp), 10, 64)
	if err != nil {
		return ErrWebhookTimestamp
	}
	want := SignWebhook(secret, ts, body)
	ok := false
	for _, v := range strings.Split(signature, ",") { // a sender may send several (key rotation)
		ok = ok || hmac.Equal([]byte(strings.TrimSpace(v)), []byte(want))
	}
	if !ok {
		return ErrWebhookSignature
	}
	if d := now.Sub(time.Unix(ts, 0)); d > window || d < -window {
		return ErrWebhookTimestamp
	}
	if guard != nil && guard.Seen(want, now, window) {
		return ErrWebhookReplay
	}
	return nil
}
