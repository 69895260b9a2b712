package ingress

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/handlers/memory"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// The rest of the service API (seed 000 §11): souls, the semantic memory
// query and the tenant's own facts, and sessions. Every route is scoped to
// the caller's tenant; another tenant's soul, session or memory is not
// found, exactly like a missing one.

// SoulBody is the body of PUT /agent/souls/{tenant_id}.
type SoulBody struct {
	UserID   string          `json:"user_id,omitempty"`
	Persona  store.Persona   `json:"persona"`
	Policies json.RawMessage `json:"policies,omitempty"`
}

// MemoryBody is the body of POST /agent/memory: a fact the tenant (or one
// of its users) wants its runs to be able to recall.
type MemoryBody struct {
	Scope  string `json:"scope"` // user | tenant
	UserID string `json:"user_id,omitempty"`
	Label  string `json:"label"`
	Text   string `json:"text"`
}

// MemoryQueryBody is the query of GET /agent/memory/query, as a JSON body
// or as URL parameters of the same names.
type MemoryQueryBody struct {
	TenantID  string `json:"tenant_id,omitempty"`
	UserID    string `json:"user_id,omitempty"`
	QueryText string `json:"query_text"`
	TopK      int    `json:"top_k,omitempty"`
	Scope     string `json:"scope,omitempty"`
}

// MemoryHit is one result of a memory query.
type MemoryHit struct {
	Key       string  `json:"key"`
	Scope     string  `json:"scope"`
	UserID    string  `json:"user_id,omitempty"`
	SessionID string  `json:"session_id,omitempty"`
	Text      string  `json:"text"`
	Score     float32 `json:"score"`
}

// maxTopK bounds a memory query's results.
const maxTopK = 100

// pathTenant is the tenant a route names in its path: it must be the
// caller's own (another tenant's is not found) and agree with X-Tenant-Id.
func pathTenant(w http.ResponseWriter, r *http.Request) (string, bool) {
	tenant := r.PathValue("tenant_id")
	if err := orch.ValidateID("tenant_id", tenant); err != nil {
		WriteError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return "", false
	}
	if c := callerOf(r.Context()); c.bound && c.TenantID != tenant {
		WriteError(w, http.StatusNotFound, "not_found", "soul not found")
		return "", false
	}
	if h := r.Header.Get("X-Tenant-Id"); h != "" && h != tenant {
		WriteError(w, http.StatusForbidden, "identity_mismatch", "X-Tenant-Id does not match the path's tenant")
		return "", false
	}
	return tenant, true
}

// userScope resolves the user a request names against a credential that
// binds one: it may repeat the credential's user, never another.
func userScope(w http.ResponseWriter, r *http.Request, named string) (string, bool) {
	if c := callerOf(r.Context()); c.bound && c.UserID != "" {
		if named != "" && named != c.UserID {
			WriteError(w, http.StatusForbidden, "identity_mismatch", "user_id does not match the credential's user")
			return "", false
		}
		return c.UserID, true
	}
	if named != "" {
		if err := orch.ValidateID("user_id", named); err != nil {
			WriteError(w, http.StatusBadRequest, "invalid_request", err.Error())
			return "", false
		}
	}
	return named, true
}

// bodyReader reads a request body and keeps the read error, which a JSON
// decoder may not wrap.
type bodyReader struct {
	r   io.Reader
	err error
}

// Body is r's body, at most MaxBodyBytes of it, to be read within
// BodyTimeout: the connection's read deadline, which net/http lifts once
// the body has been read to its end (see done), so that a long or
// streamed answer keeps its request's context. (A server-wide
// ReadTimeout would bound every route alike.)
func (g *Ingress) Body(w http.ResponseWriter, r *http.Request) *bodyReader {
	if r.Body != nil && r.Body != http.NoBody { // with no body, net/http already reads the connection for its close
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(g.cfg.BodyTimeout))
	}
	return &bodyReader{r: http.MaxBytesReader(w, r.Body, g.cfg.MaxBodyBytes)}
}

// Done reads what is left of a decoded body (what follows its JSON
// value) within its deadline.
func (b *bodyReader) Done() { _, _ = io.Copy(io.Discard, b) }

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

// tooLarge reports whether the body was cut at its size limit.
func (b *bodyReader) tooLarge() bool {
	var tooBig *http.MaxBytesError
	return errors.As(b.err, &tooBig)
}

// timedOut reports whether the body was cut at its read deadline.
func (b *bodyReader) timedOut() bool {
	return errors.Is(b.err, os.ErrDeadlineExceeded)
}

// decodeBody decodes a JSON body strictly into v, answering the request
// itself when it cannot.
func (g *Ingress) decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	code, err := g.decode(w, r, v)
	if err != nil {
		WriteError(w, StatusOf(code), code, err.Error())
	}
	return err == nil
}

// decode reads r's body (see body) and decodes it strictly into v. A body
// it cannot take is an error with its code: body_too_large,
// body_timeout, unknown_field or invalid_json.
func (g *Ingress) decode(w http.ResponseWriter, r *http.Request, v any) (string, error) {
	return g.decodeWith(w, r, v, true)
}

func (g *Ingress) decodeWith(w http.ResponseWriter, r *http.Request, v any, strict bool) (string, error) {
	body := g.Body(w, r)
	dec := json.NewDecoder(body)
	if strict {
		dec.DisallowUnknownFields()
	}
	err := dec.Decode(v)
	switch {
	case err == nil:
		body.Done()
		return "", nil
	case body.tooLarge():
		return "body_too_large", fmt.Errorf("the body is larger than %d bytes", g.cfg.MaxBodyBytes)
	case body.timedOut():
		return "body_timeout", fmt.Errorf("the body was not received within %s", g.cfg.BodyTimeout)
	case strings.Contains(err.Error(), "unknown field"):
		return "unknown_field", err
	default:
		return "invalid_json", err
	}
}

func (g *Ingress) putSoul(w http.ResponseWriter, r *http.Request) {
	tenant, ok := pathTenant(w, r)
	if !ok {
		return
	}
	var body SoulBody
	if !g.decodeBody(w, r, &body) {
		return
	}
	user, ok := userScope(w, r, body.UserID)
	if !ok {
		return
	}
	if len(body.Policies) > 0 && body.Policies[0] != '{' {
		WriteError(w, http.StatusBadRequest, "invalid_request", "policies must be a JSON object")
		return
	}
	id := "soul-" + tenant
	if user != "" {
		id += "-" + user
	}
	soul := store.Soul{ID: id, TenantID: tenant, UserID: user, Persona: body.Persona, Policies: body.Policies,
		UpdatedAt: g.now()}
	err := g.store.PutSoul(r.Context(), soul)
	if errors.Is(err, store.ErrSchema) {
		WriteError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	if g.storeError(w, err, "soul") {
		return
	}
	WriteJSON(w, http.StatusOK, soul)
}

func (g *Ingress) getSoul(w http.ResponseWriter, r *http.Request) {
	tenant, ok := pathTenant(w, r)
	if !ok {
		return
	}
	user, ok := userScope(w, r, r.URL.Query().Get("user_id"))
	if !ok {
		return
	}
	soul, err := g.store.GetSoul(r.Context(), tenant, user)
	if g.storeError(w, err, "soul") {
		return
	}
	WriteJSON(w, http.StatusOK, soul)
}

func (g *Ingress) session(w http.ResponseWriter, r *http.Request) {
	if _, sess, ok := g.callerSession(w, r); ok {
		WriteJSON(w, http.StatusOK, sess)
	}
}

// sessionTrace serves GET /agent/sessions/{session_id}/trace: every
// event of the session's runs, in order, to the caller the session is
// readable by (another tenant's, or another user's for a credential
// bound to a user, is not found).
func (g *Ingress) sessionTrace(w http.ResponseWriter, r *http.Request) {
	tenant, sess, ok := g.callerSession(w, r)
	if !ok {
		return
	}
	evs, err := g.store.Trace(r.Context(), store.TraceQuery{TenantID: tenant, SessionID: sess.SessionID})
	if g.storeError(w, err, "trace") {
		return
	}
	if evs == nil {
		evs = []store.Event{}
	}
	WriteJSON(w, http.StatusOK, map[string]any{"session_id": sess.SessionID, "events": evs})
}

// callerSession reads the session {session_id} of the caller's tenant,
// answering the error itself when it cannot: 503 without sessions, 404
// for another tenant's session or, for a credential bound to a user,
// another user's.
func (g *Ingress) callerSession(w http.ResponseWriter, r *http.Request) (tenant string, sess store.Session, ok bool) {
	tenant, ok = readScope(w, r)
	if !ok {
		return "", store.Session{}, false
	}
	if g.cfg.Sessions == nil {
		WriteError(w, http.StatusServiceUnavailable, "sessions_unavailable", "this ingress keeps no sessions")
		return "", store.Session{}, false
	}
	sess, _, err := g.cfg.Sessions.Get(r.Context(), tenant, r.PathValue("session_id"))
	if g.storeError(w, err, "session") {
		return "", store.Session{}, false
	}
	if c := callerOf(r.Context()); c.bound && c.UserID != "" && sess.UserID != c.UserID {
		WriteError(w, http.StatusNotFound, "not_found", "session not found")
		return "", store.Session{}, false
	}
	return tenant, sess, true
}

func (g *Ingress) putMemory(w http.ResponseWriter, r *http.Request) {
	tenant, ok := readScope(w, r)
	if !ok {
		return
	}
	var body MemoryBody
	if !g.decodeBody(w, r, &body) {
		return
	}
	user, ok := userScope(w, r, body.UserID)
	if !ok {
		return
	}
	var key string
	switch {
	case !memory.LabelRE.MatchString(body.Label):
		WriteError(w, http.StatusBadRequest, "invalid_request", "label must match [a-z0-9][a-z0-9_]{0,63}")
		return
	case body.Text == "":
		WriteError(w, http.StatusBadRequest, "invalid_request", "text is required")
		return
	case body.Scope == memory.ScopeTenant:
		key, user = tenant+":@tenant:"+body.Label, ""
	case body.Scope == memory.ScopeUser && user != "":
		key = tenant + ":@user:" + user + ":" + body.Label
	case body.Scope == memory.ScopeUser:
		WriteError(w, http.StatusBadRequest, "invalid_request", "a user-scoped memory needs user_id")
		return
	default:
		WriteError(w, http.StatusBadRequest, "invalid_request", "scope must be user or tenant (session memory is written by runs)")
		return
	}
	vec, err := memory.Embed(r.Context(), g.cfg.Embedder, body.Text)
	if err != nil {
		g.log.Error().Err(err).Msg("embed memory")
		WriteError(w, http.StatusServiceUnavailable, "embedder_unavailable", "the text could not be embedded")
		return
	}
	m, err := g.store.PutMemory(r.Context(), store.Memory{ID: key, Key: key, TenantID: tenant, UserID: user,
		Scope: body.Scope, Text: body.Text, Embedding: vec, Source: "api", CreatedAt: g.now()})
	if g.storeError(w, err, "memory") {
		return
	}
	WriteJSON(w, http.StatusOK, map[string]any{"key": m.Key, "scope": m.Scope, "user_id": m.UserID})
}

func (g *Ingress) queryMemory(w http.ResponseWriter, r *http.Request) {
	tenant, ok := readScope(w, r)
	if !ok {
		return
	}
	var q MemoryQueryBody
	if r.ContentLength != 0 && r.Body != http.NoBody {
		if !g.decodeBody(w, r, &q) {
			return
		}
	}
	params := r.URL.Query()
	for name, dst := range map[string]*string{"tenant_id": &q.TenantID, "user_id": &q.UserID,
		"query_text": &q.QueryText, "scope": &q.Scope} {
		if v := params.Get(name); v != "" {
			*dst = v
		}
	}
	if v := params.Get("top_k"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			WriteError(w, http.StatusBadRequest, "invalid_request", "top_k must be a number")
			return
		}
		q.TopK = n
	}
	if q.TenantID != "" && q.TenantID != tenant {
		WriteError(w, http.StatusForbidden, "identity_mismatch", "tenant_id does not match the caller's tenant")
		return
	}
	user, ok := userScope(w, r, q.UserID)
	if !ok {
		return
	}
	if c := callerOf(r.Context()); q.Scope == "" && c.bound && c.UserID != "" {
		// A user's credential sees its own memories and its tenant's,
		// never another user's: it names the scope it searches.
		WriteError(w, http.StatusBadRequest, "scope_required", "a user's query names its scope: session, user or tenant")
		return
	}
	switch {
	case strings.TrimSpace(q.QueryText) == "":
		WriteError(w, http.StatusBadRequest, "invalid_request", "query_text is required")
		return
	case q.TopK < 0 || q.TopK > maxTopK:
		WriteError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("top_k must be from 1 to %d", maxTopK))
		return
	case q.Scope != "" && q.Scope != memory.ScopeSession && q.Scope != memory.ScopeUser && q.Scope != memory.ScopeTenant:
		WriteError(w, http.StatusBadRequest, "invalid_request", "scope must be session, user or tenant")
		return
	case q.Scope == memory.ScopeTenant:
		user = "" // tenant facts belong to no user
	}
	if g.cfg.Embedder == nil {
		WriteError(w, http.StatusServiceUnavailable, "embedder_unavailable", "no embedder is configured")
		return
	}
	vec, err := memory.Embed(r.Context(), g.cfg.Embedder, q.QueryText)
	if err != nil {
		g.log.Error().Err(err).Msg("embed query")
		WriteError(w, http.StatusServiceUnavailable, "embedder_unavailable", "the query could not be embedded")
		return
	}
	hits, err := g.store.QueryMemory(r.Context(), store.MemoryQuery{TenantID: tenant, Scope: q.Scope, UserID: user,
		Vector: vec, TopK: q.TopK})
	if g.storeError(w, err, "memory") {
		return
	}
	out := make([]MemoryHit, len(hits))
	for i, h := range hits {
		out[i] = MemoryHit{Key: h.Key, Scope: h.Scope, UserID: h.UserID, SessionID: h.SessionID, Text: h.Text, Score: h.Score}
	}
	WriteJSON(w, http.StatusOK, map[string]any{"hits": out})
}
