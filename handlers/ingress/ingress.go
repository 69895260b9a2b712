package ingress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/auth"
	"github.com/agentbus/agentbus/egress"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/defs"
	"github.com/agentbus/agentbus/handlers/health"
	"github.com/agentbus/agentbus/handlers/ledger"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/handlers/tracedag"
	"github.com/agentbus/agentbus/metrics"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
	"github.com/agentbus/agentbus/store"
	"github.com/agentbus/agentbus/tracing"
)

// IngressStore is what the HTTP API reads and writes.
type IngressStore interface {
	GetPlan(ctx context.Context, tenantID, planID string) (store.Plan, int64, error)
	Trace(ctx context.Context, q store.TraceQuery) ([]store.Event, error)
	GetSoul(ctx context.Context, tenantID, userID string) (store.Soul, error)
	ListSessions(ctx context.Context, q store.SessionQuery) ([]store.Session, error)
	GetExecution(ctx context.Context, tenantID, id string) (store.Execution, error)
	ListExecutions(ctx context.Context, q store.ExecutionQuery) ([]store.Execution, error)
	PutSoul(ctx context.Context, soul store.Soul) error
	PutMemory(ctx context.Context, m store.Memory) (store.Memory, error)
	QueryMemory(ctx context.Context, q store.MemoryQuery) ([]store.MemoryHit, error)
	health.EventQuerier
	defs.Store
}

// IngressConfig configures the HTTP API.
type IngressConfig struct {
	RunTimeout   time.Duration // how long POST /agent/run waits; default 5m
	MaxBodyBytes int64         // default 64 KiB
	// BodyTimeout bounds reading a request's body (default 30s): a client
	// that trickles it gets 408 instead of holding the handler.
	BodyTimeout time.Duration
	// Adapters are the protocols served besides the native API (the
	// OpenAI-compatible chat endpoint, handlers/chat).
	Adapters []Adapter
	// ServiceToken, when set, admits a trusted front end that presents it
	// as a bearer token and names the tenant in X-Tenant-Id.
	ServiceToken string
	// Auth verifies tenants' own bearer credentials (API keys, JWTs): the
	// tenant and user then come from the credential. With neither Auth nor
	// ServiceToken the ingress is open (loopback development only).
	Auth auth.Verifier
	// Credentials receives the X-Api-Key of a request, to be forwarded on
	// the run's skill calls; nil ignores the header.
	Credentials *runctl.Credentials
	// Sessions serves GET /agent/sessions/{id}.
	Sessions *runctl.Sessions
	// Embedder embeds memory queries and the facts posted to memory; nil
	// refuses memory queries.
	Embedder store.Embedder
	// Retention sets the ttl_at of the facts posted to memory, by scope;
	// zero keeps them for ever.
	Retention store.MemoryRetention
	// Now is the clock of the documents the API writes; default time.Now.
	Now func() time.Time
	// Cancels receives the cancels of POST /agent/runs/{run_id}/cancel,
	// and the interrupts and steering messages; nil answers them 503
	// unavailable.
	Cancels *runctl.Cancels
	// Gates are the runs' gates, decided by POST
	// /agent/runs/{run_id}/approvals/{gate_id}; nil answers 503.
	Gates *runctl.Gates
	// Artifacts serves GET /agent/artifacts/{sha256}, the data of the
	// tenant's skill results' attachments; nil answers 503.
	Artifacts *handlers.Attachments
	// ToolSecrets keeps the webhook tools' secrets; nil (or one without
	// a key) refuses to create webhook tools (503 secrets_unavailable).
	ToolSecrets defs.ToolSecrets
	// Egress judges a webhook tool's URL when it is written: one whose
	// host is, or resolves only to, an address the policy refuses is
	// answered 400 egress_denied (the executor checks every connection
	// again when it dials). Nil is egress.Default().
	Egress *egress.Policy
	// Limiter bounds each tenant's request rate and concurrent runs
	// across every ingress (POST /agent/run, POST /agent/events); nil
	// admits everything.
	Limiter *ledger.Limiter
}

// Ingress is the chat API bridge (seed 000 §11): it validates requests and
// identity headers, publishes run.requested and answers with the run's
// result, as JSON or as a server-sent event stream.
type Ingress struct {
	js    jetstream.JetStream
	nc    *nats.Conn
	store IngressStore
	log   zerolog.Logger
	cfg   IngressConfig
	runs  *runclient.Client
	defs  *defs.API
}

// NewIngress returns the API. Call Start before serving.
func NewIngress(js jetstream.JetStream, st IngressStore, log zerolog.Logger, cfg IngressConfig) *Ingress {
	if cfg.RunTimeout <= 0 {
		cfg.RunTimeout = 5 * time.Minute
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 64 << 10
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = 30 * time.Second
	}
	g := &Ingress{js: js, nc: js.Conn(), store: st, log: log, cfg: cfg}
	g.defs = defs.New(st, log, defs.Config{Tenant: readScope, Decode: g.decodeBody, Now: g.now,
		ToolSecrets: cfg.ToolSecrets, Egress: cfg.Egress})
	return g
}

func (g *Ingress) now() time.Time {
	if g.cfg.Now != nil {
		return g.cfg.Now().UTC()
	}
	return time.Now().UTC()
}

// Start follows finished runs (runclient.New): every ingress instance
// sees every run.finished and answers the callers it holds, also after a
// NATS restart or a dropped connection.
func (g *Ingress) Start() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	runs, err := runclient.New(ctx, g.js, runclient.Config{Source: "ingress", OnError: func(err error) {
		g.log.Debug().Err(err).Msg("run.finished consumer")
	}, OnFinished: func(res orch.RunResult) {
		if g.cfg.Limiter != nil {
			go g.release(res) // off the follower, which hands results to their waiters
		}
	}})
	if err != nil {
		return fmt.Errorf("handlers: ingress: %w", err)
	}
	g.runs = runs
	return nil
}

// Stop stops following finished runs.
func (g *Ingress) Stop() {
	if g.runs != nil {
		g.runs.Close()
	}
}

// Handler returns the HTTP routes.
func (g *Ingress) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /agent/run", g.run)
	mux.HandleFunc("GET /agent/plans/{plan_id}", g.plan)
	mux.HandleFunc("GET /agent/plans/{plan_id}/trace", g.trace)
	mux.HandleFunc("PUT /agent/souls/{tenant_id}", g.putSoul)
	mux.HandleFunc("GET /agent/souls/{tenant_id}", g.getSoul)
	mux.HandleFunc("GET /agent/sessions/{session_id}", g.session)
	mux.HandleFunc("GET /agent/sessions/{session_id}/trace", g.sessionTrace)
	mux.HandleFunc("POST /agent/sessions/{session_id}/reply", g.reply)
	mux.HandleFunc("POST /agent/sessions/{session_id}/handoff", g.handoffSession)
	mux.HandleFunc("GET /agent/sessions", g.listSessions)
	mux.HandleFunc("GET /agent/executions", g.listExecutions)
	mux.HandleFunc("GET /agent/executions/{execution_id}", g.getExecution)
	mux.HandleFunc("POST /agent/memory", g.putMemory)
	mux.HandleFunc("GET /agent/memory/query", g.queryMemory)
	mux.HandleFunc("POST /agent/runs/{run_id}/cancel", g.cancel)
	mux.HandleFunc("GET /agent/runs/{run_id}/approvals", g.approvals)
	mux.HandleFunc("POST /agent/runs/{run_id}/approvals/{gate_id}", g.approve)
	mux.HandleFunc("POST /agent/runs/{run_id}/interrupt", g.interrupt)
	mux.HandleFunc("POST /agent/runs/{run_id}/resume", g.resume)
	mux.HandleFunc("POST /agent/runs/{run_id}/steer", g.steer)
	mux.HandleFunc("GET /agent/runs/{run_id}/stream", g.stream)
	mux.HandleFunc("GET /agent/health", g.health)
	mux.HandleFunc("GET /agent/audit/events", g.auditEvents)
	mux.HandleFunc("GET /agent/runs", g.recentRuns)
	mux.HandleFunc("GET /agent/artifacts/{sha256}", g.artifact)
	mux.HandleFunc("POST /agent/events", g.inboundEvent)
	mux.HandleFunc("GET /agent/events/{event_id}", g.eventEvaluations)
	g.defs.Routes(mux)
	for _, a := range g.cfg.Adapters {
		a.Mount(mux, Runs{g: g})
	}
	mux.HandleFunc("GET /dashboard", g.dashboard)
	mux.HandleFunc("GET /dashboard/{$}", g.dashboard)
	mux.HandleFunc("GET /dashboard/{file}", g.dashboard)
	mux.HandleFunc("GET /openapi.json", g.reference)
	mux.HandleFunc("GET /docs", g.reference)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		status := http.StatusOK
		if !g.nc.IsConnected() {
			status = http.StatusServiceUnavailable
		}
		WriteJSON(w, status, map[string]any{"nats_connected": g.nc.IsConnected()})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, http.StatusNotFound, "not_found", "no route "+r.Method+" "+r.URL.Path)
	})
	return g.authenticate(mux)
}

func (g *Ingress) run(w http.ResponseWriter, r *http.Request) {
	var body runclient.Request
	if code, err := g.decode(w, r, &body); err != nil {
		WriteError(w, StatusOf(code), code, err.Error())
		return
	}
	req, code, err := g.runRequest(r, body)
	if err != nil {
		WriteError(w, StatusOf(code), code, err.Error())
		return
	}
	sub, ok := g.submit(w, r, "POST /agent/run", req)
	if !ok {
		return
	}
	defer sub.close()
	ctx, cancel := context.WithTimeout(r.Context(), g.cfg.RunTimeout)
	defer cancel()
	if req.Stream {
		s, err := openSSE(w, req.RunID)
		if err != nil {
			WriteError(w, http.StatusInternalServerError, "internal", err.Error())
			return
		}
		defer s.close()
		g.streamRun(ctx, s, req, sub.tail, sub.pending.Wait)
		return
	}
	res, err := sub.pending.Wait(ctx)
	switch {
	case err == nil && runclient.Parked(res):
		// The run waits at a gate: the caller decides it with POST
		// /agent/runs/{run_id}/approvals/{gate_id} and follows the run
		// with GET /agent/runs/{run_id}/stream.
		WriteJSON(w, http.StatusAccepted, runclient.ResponseOf(res))
	case err == nil:
		WriteJSON(w, http.StatusOK, runclient.ResponseOf(res))
	default:
		WriteRunTimeout(w, req.RunID)
	}
}

// WriteRunTimeout answers a run that did not finish within the request's
// time: it goes on, and its plan can be read later.
func WriteRunTimeout(w http.ResponseWriter, runID string) {
	WriteJSON(w, http.StatusGatewayTimeout, map[string]any{"run_id": runID, "plan_id": orch.PlanID(runID),
		"error": map[string]string{"code": "run_timeout",
			"message": "the run is still in progress; it continues, and its plan (plan_id) can be read later"}})
}

// submitted is a run the ingress submitted for a request: the result to
// wait for, the REPLY stream's tail before it (for a run that streams)
// and the request's span.
type submitted struct {
	pending *runclient.Pending
	tail    uint64
	span    trace.Span
}

func (s submitted) close() {
	s.pending.Close()
	if s.span != nil {
		s.span.End()
	}
}

// submit admits req (the tenant's request limits), keeps the caller's
// API key for the run's skill calls and publishes run.requested. It
// answers the request itself when it cannot, and reports false.
func (g *Ingress) submit(w http.ResponseWriter, r *http.Request, route string, req orch.RunRequest) (submitted, bool) {
	var sub submitted
	var err error
	if req.Stream {
		if sub.tail, err = g.replyTail(r.Context()); err != nil {
			WriteError(w, http.StatusServiceUnavailable, "unavailable", "cannot stream: "+err.Error())
			return sub, false
		}
	}
	if !g.admit(w, r, req.TenantID, req.RunID) {
		return sub, false
	}
	if req.KeyForwarded, err = g.cfg.Credentials.Put(r.Context(), req.RunID, r.Header.Get("X-Api-Key")); err != nil {
		g.release(orch.RunResult{RunID: req.RunID, TenantID: req.TenantID})
		g.log.Error().Err(err).Str("run_id", req.RunID).Msg("store credentials")
		WriteError(w, http.StatusServiceUnavailable, "unavailable", "the run could not be queued")
		return sub, false
	}
	var sctx context.Context
	sctx, sub.span = tracing.Server(r.Context(), route)
	if sub.pending, err = g.runs.Submit(sctx, req); err != nil {
		sub.span.End()
		g.release(orch.RunResult{RunID: req.RunID, TenantID: req.TenantID})
		g.log.Error().Err(err).Str("run_id", req.RunID).Msg("publish run.requested")
		WriteError(w, http.StatusServiceUnavailable, "unavailable", "the run could not be queued")
		return sub, false
	}
	g.log.Info().Str("run_id", req.RunID).Str("tenant_id", req.TenantID).Str("session_id", req.SessionID).Str("route", route).Msg("run requested")
	return sub, true
}

// runRequest is the run a request body asks for, with the identity
// headers and the caller's credential applied and validated.
func (g *Ingress) runRequest(r *http.Request, body runclient.Request) (orch.RunRequest, string, error) {
	for _, h := range []struct {
		header string
		field  *string
	}{{"X-Tenant-Id", &body.TenantID}, {"X-User-Id", &body.UserID}, {"X-Session-Id", &body.SessionID}} {
		v := r.Header.Get(h.header)
		if v == "" {
			continue
		}
		if *h.field != "" && *h.field != v {
			return orch.RunRequest{}, "identity_mismatch", fmt.Errorf("%s does not match the body", h.header)
		}
		*h.field = v
	}
	if c := callerOf(r.Context()); c.bound {
		// A tenant's credential names the tenant (and the user, if it
		// binds one); the body may repeat them, never contradict them.
		for _, f := range []struct {
			got        *string
			want, what string
		}{
			{&body.TenantID, c.TenantID, "tenant_id"}, {&body.UserID, c.UserID, "user_id"}} {
			if f.want == "" {
				continue
			}
			if *f.got != "" && *f.got != f.want {
				return orch.RunRequest{}, "identity_mismatch", fmt.Errorf("the body's %s does not match the credential", f.what)
			}
			*f.got = f.want
		}
	}
	req := orch.RunRequest{RunID: uuid.NewString(), TenantID: body.TenantID, UserID: body.UserID,
		SessionID: body.SessionID, Message: body.Message, Stream: body.Stream, Budget: body.Budget, AgentID: body.AgentID}
	if err := orch.ValidateRequest(req); err != nil {
		return req, "invalid_request", err
	}
	agentID, code, err := g.sessionAgent(r.Context(), req)
	if code != "" {
		return req, code, err
	}
	if agentID != "" {
		// The router loads the agent again (a request may bypass HTTP);
		// checking here answers the caller at once.
		_, err := handlers.LoadAgent(r.Context(), g.store, req.TenantID, agentID)
		var refused *agents.Error
		switch {
		case errors.As(err, &refused):
			return req, refused.Code, errors.New(refused.Message)
		case err != nil:
			g.log.Error().Err(err).Msg("load agent")
			return req, "store_unavailable", errors.New("the agent could not be read")
		}
	}
	return req, "", nil
}

// sessionAgent is the agent a new run acts as in its session (the
// session's current one, or the run's own), or the error code and reason
// of a run the session refuses (orch.SessionAgent, the decider's rule).
func (g *Ingress) sessionAgent(ctx context.Context, req orch.RunRequest) (string, string, error) {
	if g.cfg.Sessions == nil {
		return req.AgentID, "", nil
	}
	sess, _, err := g.cfg.Sessions.Get(ctx, req.TenantID, req.SessionID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return req.AgentID, "", nil
	case err != nil:
		g.log.Error().Err(err).Msg("read session")
		return "", "store_unavailable", errors.New("the session could not be read")
	}
	agentID, refused := orch.SessionAgent(req, handlers.SessionState(&sess))
	if refused != nil {
		return "", refused.Code, errors.New(refused.Message)
	}
	return agentID, "", nil
}

// readScope returns the tenant a read (or a cancel) is scoped to: the
// credential's, or the X-Tenant-Id of a trusted or open caller. There is
// no read across tenants: without a tenant it answers the request itself.
func readScope(w http.ResponseWriter, r *http.Request) (string, bool) {
	tenant := r.Header.Get("X-Tenant-Id")
	if c := callerOf(r.Context()); c.bound {
		tenant = c.TenantID
	}
	if tenant == "" {
		WriteError(w, http.StatusBadRequest, "tenant_required", "reads and cancels are scoped to a tenant: send X-Tenant-Id")
		return "", false
	}
	if err := orch.ValidateID("tenant_id", tenant); err != nil {
		WriteError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return "", false
	}
	return tenant, true
}

// artifact serves GET /agent/artifacts/{sha256}: the data an attachment
// reference (artifact://<tenant>/<sha256>) names, with its Content-Type,
// to the tenant that holds it; any other tenant gets 404.
func (g *Ingress) artifact(w http.ResponseWriter, r *http.Request) {
	tenant, ok := readScope(w, r)
	if !ok {
		return
	}
	if g.cfg.Artifacts == nil {
		WriteError(w, http.StatusServiceUnavailable, "artifacts_unavailable", "this ingress serves no artifacts")
		return
	}
	res, typ, err := g.cfg.Artifacts.Open(r.Context(), tenant, r.PathValue("sha256"))
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		WriteError(w, http.StatusNotFound, "not_found", "artifact not found")
		return
	}
	if err != nil {
		g.log.Error().Err(err).Msg("artifact")
		WriteError(w, http.StatusServiceUnavailable, "unavailable", "the artifact cannot be read now")
		return
	}
	defer res.Close()
	w.Header().Set("Content-Type", typ)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Disposition", "attachment")
	if _, err := io.Copy(w, res); err != nil {
		g.log.Warn().Err(err).Msg("artifact: response cut short")
	}
}

func (g *Ingress) plan(w http.ResponseWriter, r *http.Request) {
	tenant, ok := readScope(w, r)
	if !ok {
		return
	}
	p, version, err := g.store.GetPlan(r.Context(), tenant, r.PathValue("plan_id"))
	if g.storeError(w, err, "plan") {
		return
	}
	WriteJSON(w, http.StatusOK, map[string]any{"plan": p, "version": version})
}

func (g *Ingress) trace(w http.ResponseWriter, r *http.Request) {
	tenant, ok := readScope(w, r)
	if !ok {
		return
	}
	p, _, err := g.store.GetPlan(r.Context(), tenant, r.PathValue("plan_id"))
	if g.storeError(w, err, "plan") {
		return
	}
	evs, err := g.store.Trace(r.Context(), store.TraceQuery{TenantID: p.TenantID, PlanID: p.PlanID})
	if g.storeError(w, err, "trace") {
		return
	}
	if r.URL.Query().Get("view") == "dag" {
		WriteJSON(w, http.StatusOK, map[string]any{"plan_id": p.PlanID, "dag": tracedag.Build(evs)})
		return
	}
	WriteJSON(w, http.StatusOK, map[string]any{"plan_id": p.PlanID, "events": evs})
}

func (g *Ingress) storeError(w http.ResponseWriter, err error, what string) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, store.ErrNotFound):
		WriteError(w, http.StatusNotFound, "not_found", what+" not found")
	default:
		g.log.Error().Err(err).Msg("store read")
		WriteError(w, http.StatusServiceUnavailable, "store_unavailable", "the store could not be read")
	}
	return true
}

// StatusOf is the HTTP status of a refusal's error code.
func StatusOf(code string) int {
	switch code {
	case "body_too_large":
		return http.StatusRequestEntityTooLarge
	case "body_timeout":
		return http.StatusRequestTimeout
	case "identity_mismatch":
		return http.StatusForbidden
	case "agent_inactive", orch.SessionRefusedHandedOff, orch.SessionRefusedCompleted, orch.SessionRefusedAgent:
		return http.StatusConflict
	case "store_unavailable":
		return http.StatusServiceUnavailable
	default:
		return http.StatusBadRequest
	}
}

// admit asks the limiter to admit a request of the tenant (and a run,
// when runID is set), answering 429 with Retry-After when it refuses and
// 503 when the limits cannot be read.
func (g *Ingress) admit(w http.ResponseWriter, r *http.Request, tenant, runID string) bool {
	a, err := g.cfg.Limiter.Admit(r.Context(), tenant, runID)
	switch {
	case err != nil:
		g.log.Error().Err(err).Str("tenant_id", tenant).Msg("request limits")
		WriteError(w, http.StatusServiceUnavailable, "unavailable", "the request limits cannot be read now")
		return false
	case !a.Allowed:
		metrics.RequestLimited(a.Code)
		w.Header().Set("Retry-After", strconv.Itoa(a.RetryAfterSeconds()))
		WriteError(w, http.StatusTooManyRequests, a.Code, a.Message)
		return false
	}
	return true
}

// release frees a finished run's concurrency lease (every ingress sees
// every run.finished; the one holding no lease writes nothing).
func (g *Ingress) release(res orch.RunResult) {
	if g.cfg.Limiter == nil || res.TenantID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The requests whose messages answered the run's questions held a
	// lease each, freed with the run they answered.
	for _, id := range append([]string{res.RunID}, res.Answered...) {
		if err := g.cfg.Limiter.Release(ctx, res.TenantID, id); err != nil {
			g.log.Warn().Err(err).Str("run_id", id).Msg("concurrency lease not released; it expires by itself")
		}
	}
}

// WriteError answers an error: a runclient.APIError with its stable code
// (handlers.WriteError).
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	handlers.WriteError(w, status, code, msg)
}

// WriteJSON answers v as JSON with status (handlers.WriteJSON).
func WriteJSON(w http.ResponseWriter, status int, v any) { handlers.WriteJSON(w, status, v) }
