// Package auth authenticates the callers of the agentbus ingress: it turns
// a bearer credential into the Identity (tenant, optional user) a request
// may speak for.
//
// Two kinds of credential are accepted:
//
//   - Tenant API keys, abk_<key id>_<secret>, issued by Keys (and the
//     "agentbus tenants" command). Only a keyed SHA-256 (HMAC) of the
//     secret is stored, in the NATS KV bucket KeyBucket under the key id,
//     next to the tenant, the optional user and the key's revocation
//     state; the HMAC key is the bucket's hash-key entry. The secrets are
//     256 random bits, so a password hash would only add latency. Verify
//     reads the record on every call, so a revoked or rotated key is
//     refused at once, and compares in constant time. A key stored with
//     argon2id before keyed hashes verifies until it is rotated; one that
//     already passed that slow check against the same record revision is
//     accepted from an in-memory cache.
//   - JWTs signed with RS256 or ES256 (public keys from a JWKS file or URL)
//     or, for development, HS256 with a shared secret, checked by JWT. The
//     tenant comes from a claim (tenant_id by default), the user from
//     user_id or sub.
//
// Select routes a token to the right verifier by its shape. Every refused
// credential yields an error wrapping ErrUnauthenticated (answer 401);
// failures of the key store or the JWKS endpoint wrap ErrUnavailable
// instead (answer 503). Errors never contain a secret or a full credential,
// and the package never logs.
package auth
