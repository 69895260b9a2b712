package skills

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
)

// apiKeyKey is the context key of a per-call API key.
type apiKeyKey struct{}

// WithAPIKey returns a copy of ctx carrying key, the API key that Client
// calls made with the returned context send as the X-Api-Key header in
// place of Config.APIKey. It lets one Client serve many callers, each
// forwarding its own key (for example the X-Api-Key of an ingress
// request). An empty key falls back to Config.APIKey. The key is never
// included in an error. Over stdio there is no header and the key is
// ignored.
func WithAPIKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, apiKeyKey{}, key)
}

// apiKey returns the key a call made with ctx sends: the WithAPIKey key,
// or else Config.APIKey.
func (c *Client) apiKey(ctx context.Context) string {
	if key, _ := ctx.Value(apiKeyKey{}).(string); key != "" {
		return key
	}
	return c.cfg.APIKey
}

// headers is the transports' per-request header function: every HTTP
// request carries the API key of the context it is sent with.
func (c *Client) headers(ctx context.Context) map[string]string {
	if key := c.apiKey(ctx); key != "" {
		return map[string]string{apiKeyHeader: key}
	}
	return nil
}

// keyID identifies an API key in cache and session keys without holding
// its text in them: a truncated SHA-256, "" for no key.
func keyID(key string) string {
	if key == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:12])
}

// APIKeyOf is the per-call API key ctx carries (WithAPIKey), or "". Guards
// use it to recognise the key where it must never go.
func APIKeyOf(ctx context.Context) string {
	key, _ := ctx.Value(apiKeyKey{}).(string)
	return key
}
