package ingress

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"

	"github.com/agentbus/agentbus/auth"
)

// Caller modes: how the ingress learned who a request speaks for.
const (
	// CallerOpen: no authentication is configured (loopback development);
	// the identity headers and body are taken at their word.
	CallerOpen = "open"
	// CallerService: a trusted front end (the chat API of seed 000 §11)
	// presented the service token and names the tenant and user in the
	// identity headers.
	CallerService = "service"
)

// caller is the identity a request was authenticated as.
type caller struct {
	auth.Identity
	// bound: the tenant (and the user, when set) come from a tenant's own
	// credential, and every header and body must agree with them.
	bound bool
}

type callerKey struct{}

func callerOf(ctx context.Context) caller {
	c, _ := ctx.Value(callerKey{}).(caller)
	return c
}

// authenticate establishes the caller of every request but /healthz, the
// dashboard's static page and assets (GET /dashboard...; the API calls
// the page makes are authenticated like any other) and the API's
// reference (GET /openapi.json, GET /docs): a
// tenant's credential (API key or JWT) binds the tenant and user; the
// service token trusts the identity headers; with neither configured the
// ingress is open. Identity headers that disagree with a tenant's
// credential are refused with 403 identity_mismatch.
func (g *Ingress) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
			(isDashboardPath(r.URL.Path) || isReferencePath(r.URL.Path)) {
			next.ServeHTTP(w, r)
			return
		}
		c, status, code, msg := g.identify(r)
		if status != 0 {
			WriteError(w, status, code, msg)
			return
		}
		if c.bound {
			if h := r.Header.Get("X-Tenant-Id"); h != "" && h != c.TenantID {
				WriteError(w, http.StatusForbidden, "identity_mismatch", "X-Tenant-Id does not match the credential's tenant")
				return
			}
			if h := r.Header.Get("X-User-Id"); h != "" && c.UserID != "" && h != c.UserID {
				WriteError(w, http.StatusForbidden, "identity_mismatch", "X-User-Id does not match the credential's user")
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	})
}

// identify returns the request's caller, or the status, code and message
// of its refusal.
func (g *Ingress) identify(r *http.Request) (caller, int, string, string) {
	token, hasBearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	hasBearer = hasBearer && token != ""
	switch {
	case hasBearer && g.cfg.ServiceToken != "" &&
		subtle.ConstantTimeCompare([]byte(token), []byte(g.cfg.ServiceToken)) == 1:
		return caller{Identity: auth.Identity{Method: CallerService}}, 0, "", ""
	case hasBearer && g.cfg.Auth != nil:
		id, err := g.cfg.Auth.Verify(r.Context(), token)
		if errors.Is(err, auth.ErrUnauthenticated) {
			return caller{}, http.StatusUnauthorized, "unauthorized", "the credential was refused"
		}
		if err != nil {
			g.log.Error().Err(err).Msg("verify credential")
			return caller{}, http.StatusServiceUnavailable, "unavailable", "the credential could not be verified"
		}
		return caller{Identity: id, bound: true}, 0, "", ""
	case g.cfg.ServiceToken == "" && g.cfg.Auth == nil:
		return caller{Identity: auth.Identity{Method: CallerOpen}}, 0, "", ""
	default:
		return caller{}, http.StatusUnauthorized, "unauthorized", "a bearer credential is required"
	}
}

// BindsUser reports whether r's credential names its user (the run's
// user_id is the credential's).
func BindsUser(r *http.Request) bool {
	c := callerOf(r.Context())
	return c.bound && c.UserID != ""
}
