package auth

import (
	"context"
	"errors"
)

// Identity is who a request speaks for, as its credential proves.
type Identity struct {
	TenantID string
	UserID   string
	Method   string
	KeyID    string
}

// ErrUnauthenticated is wrapped by every refused credential.
var ErrUnauthenticated = errors.New("auth: unauthenticated")

// Verifier verifies a bearer credential.
type Verifier interface {
	Verify(ctx context.Context, token string) (Identity, error)
}
