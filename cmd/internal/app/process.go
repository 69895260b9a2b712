package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentbus/agentbus/auth"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/a2a"
	"github.com/agentbus/agentbus/handlers/chat"
	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/handlers/ledger"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/metrics"
)

// SignalContext returns a context cancelled on SIGINT or SIGTERM.
func SignalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// Process is a role binary: cmd/<Name> runs the workers of Roles.
type Process struct {
	Name    string
	Summary string
	Roles   []string
}

// Processes are the role binaries; the ingress, which serves HTTP, is the
// one other binary of a deployment.
var Processes = []Process{
	{"router", "the manager role: routes tasks, dispatches plan steps, replans, synthesises answers", []string{handlers.RoleRouter}},
	{"planner", "SubAgent-A: discovers skills over MCP and writes verified plans", []string{handlers.RolePlanner}},
	{"executor", "SubAgent-B: runs plan steps with only their allowed skills and writes outputs to memory", []string{handlers.RoleExecutor}},
	{"aggregator", "fan-in of step results per group, the projections into the store, and the alert rules",
		[]string{handlers.RoleAggregator, handlers.RoleProjector, handlers.RoleMonitor}},
}

// Main is the main of the role binary name: it parses args and runs the
// process's roles until SIGTERM. It returns the exit code.
func Main(name string, args []string) int {
	i := slices.IndexFunc(Processes, func(p Process) bool { return p.Name == name })
	if i < 0 {
		fmt.Fprintf(os.Stderr, "%s: no such role process\n", name)
		return 2
	}
	p := Processes[i]
	return RunProcess(p.Name, Parse(p.Name, p.Summary, args, nil), p.Roles...)
}

// RunProcess runs the workers of roles in a process until SIGTERM, then
// drains them. It returns the process exit code.
func RunProcess(process string, c *Config, roles ...string) int {
	log := Logger(process, c.LogLevel)
	ctx, stop := SignalContext()
	defer stop()
	d, err := Connect(ctx, process, c, log)
	if err != nil {
		log.Error().Err(err).Msg("start")
		return 1
	}
	defer d.Close()
	if c.MetricsAddr != "" {
		stopMetrics, err := ServeMetrics(ctx, c.MetricsAddr, log)
		if err != nil {
			log.Error().Err(err).Msg("metrics")
			return 1
		}
		defer stopMetrics()
	}
	if err := d.RunRoles(ctx, roles...); err != nil {
		log.Error().Err(err).Msg("run")
		return 1
	}
	log.Info().Msg("drained; bye")
	return 0
}

// IngressOptions configures the HTTP API of a process.
type IngressOptions struct {
	Addr       string
	RunTimeout time.Duration
	jwks       string // a JWKS file or URL; see jwtConfig
	// Token admits a trusted front end that names tenants in the
	// identity headers (seed 000 §11.3).
	Token string
	// APIKeys verifies tenants' own API keys (agentbus tenants create).
	APIKeys bool
	// JWT verifies tenants' bearer tokens when it names a key source.
	JWT auth.JWTConfig
	// Limits are the tenants' default request limits (the config
	// bucket's "limits" key overrides them per tenant); LeaseTTL bounds
	// how long a run holds a concurrency slot its ingress never saw end.
	Limits   ledger.TenantLimits
	LeaseTTL time.Duration
	// Wrap, when set, wraps the ingress's handler: tests hold its traffic
	// to api/openapi.yaml with it (api/apitest.Wrap).
	Wrap func(http.Handler) http.Handler
}

// RegisterLimits registers the request-limit flags on fs.
func (o *IngressOptions) RegisterLimits(fs *flag.FlagSet) {
	envRateLimit.Bind(fs, &o.Limits.RequestsPerMinute)
	envTenantRuns.Bind(fs, &o.Limits.ConcurrentRuns)
	envRunLeaseTTL.Bind(fs, &o.LeaseTTL)
}

// RegisterAuth registers the authentication flags on fs. The HS256
// secret is read from the environment only, so it never shows in a
// process listing.
func (o *IngressOptions) RegisterAuth(fs *flag.FlagSet) {
	envIngressToken.Bind(fs, &o.Token)
	envIngressAPIKeys.Bind(fs, &o.APIKeys)
	envJWKS.Bind(fs, &o.jwks)
	envJWTIssuer.Bind(fs, &o.JWT.Issuer)
	envJWTAudience.Bind(fs, &o.JWT.Audience)
	envJWTTenantClaim.Bind(fs, &o.JWT.TenantClaim)
	envJWTUserClaim.Bind(fs, &o.JWT.UserClaim)
}

// jwtConfig returns the JWT settings and whether JWTs are accepted: a
// JWKS or, for development, an HS256 secret in INGRESS_JWT_HS256_SECRET.
func (o *IngressOptions) jwtConfig() (auth.JWTConfig, bool) {
	c := o.JWT
	switch {
	case strings.HasPrefix(o.jwks, "http://") || strings.HasPrefix(o.jwks, "https://"):
		c.JWKSURL = o.jwks
	case o.jwks != "":
		c.JWKSFile = o.jwks
	}
	if secret := envJWTHS256Secret.Value(); secret != "" && c.HS256Secret == nil {
		c.HS256Secret = []byte(secret)
	}
	return c, c.JWKSFile != "" || c.JWKSURL != "" || len(c.HS256Secret) > 0
}

// ErrAuthRequired refuses a bind beyond loopback with no authentication.
var ErrAuthRequired = errors.New("binding beyond loopback requires authentication: --token, --api-keys or --jwt-jwks " +
	"(or INGRESS_JWT_HS256_SECRET)")

// ServeIngress serves the HTTP API on opts.Addr until ctx ends, then shuts
// down gracefully. ready, when set, receives the bound address.
func ServeIngress(ctx context.Context, d *Deps, opts IngressOptions, ready func(addr string)) error {
	verifier, err := opts.verifier(ctx, d)
	if err != nil {
		return err
	}
	if err := checkBind(opts.Addr, opts.Token != "" || verifier != nil); err != nil {
		return err
	}
	creds, err := d.Credentials(ctx)
	if err != nil {
		return err
	}
	sessions, err := d.bucket(ctx, handlers.BucketSessions)
	if err != nil {
		return err
	}
	cancels, err := d.bucket(ctx, handlers.BucketCancels) // written only: the ingress follows no cancel
	if err != nil {
		return fmt.Errorf("cancels bucket: %w", err)
	}
	gates, err := d.bucket(ctx, runctl.BucketGates)
	if err != nil {
		return fmt.Errorf("gates bucket: %w", err)
	}
	limits, err := d.bucket(ctx, ledger.BucketLimits)
	if err != nil {
		return fmt.Errorf("limits bucket: %w", err)
	}
	config, err := d.bucket(ctx, handlers.BucketConfig)
	if err != nil {
		return fmt.Errorf("config bucket: %w", err)
	}
	artifacts, err := handlers.NewAttachments(ctx, d.JS)
	if err != nil {
		return fmt.Errorf("artifacts: %w", err)
	}
	secrets, err := d.ToolSecrets(ctx)
	if err != nil {
		return err
	}
	policy, err := d.Config.EgressPolicy()
	if err != nil {
		return err
	}
	g := ingress.NewIngress(d.JS, d.Store, d.Log.With().Str("role", "ingress").Logger(),
		ingress.IngressConfig{RunTimeout: opts.RunTimeout, ServiceToken: opts.Token, Auth: verifier, Credentials: creds,
			Adapters: []ingress.Adapter{chat.Adapter{}, a2a.Adapter{}},
			Sessions: &runctl.Sessions{KV: sessions}, Embedder: d.Embedder, Retention: d.Config.MemoryRetention,
			Cancels: runctl.NewCancels(cancels),
			Gates:   &runctl.Gates{KV: gates}, Artifacts: artifacts, ToolSecrets: secrets, Egress: policy,
			Limiter: &ledger.Limiter{KV: limits, Config: config, Defaults: opts.Limits, LeaseTTL: opts.LeaseTTL}})
	if err := retry(ctx, g.Start); err != nil {
		return err
	}
	defer g.Stop()
	inbound, err := retryValue(ctx, func() (jetstream.Consumer, error) {
		return d.JS.Consumer(ctx, handlers.InboundConsumer.Stream, handlers.InboundConsumer.Name)
	})
	if err != nil {
		return fmt.Errorf("inbound consumer: %w", err)
	}
	inboundCtx, stopInbound := context.WithCancel(ctx)
	inboundDone := make(chan error, 1)
	go func() {
		err := g.ServeInbound(inboundCtx, inbound)
		if err != nil {
			d.Log.Error().Err(err).Msg("inbound events are not consumed")
		}
		inboundDone <- err
	}()
	defer func() { stopInbound(); <-inboundDone }()
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics.Handler())
	h := g.Handler()
	if opts.Wrap != nil {
		h = opts.Wrap(h)
	}
	mux.Handle("/", h)
	// No ReadTimeout or WriteTimeout: answers stream for as long as a run
	// does; the ingress bounds each body's read itself (BodyTimeout).
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: idleTimeout}
	if ready != nil {
		ready(ln.Addr().String())
	}
	d.Log.Info().Str("addr", ln.Addr().String()).Msg("ingress listening")
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return srv.Shutdown(shut)
}

// ServeMetrics serves Prometheus /metrics on addr until the returned
// stop is called or ctx ends. The metrics name no tenant.
func ServeMetrics(ctx context.Context, addr string, log zerolog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: idleTimeout}
	go func() { _ = srv.Serve(ln) }()
	log.Info().Str("addr", ln.Addr().String()).Msg("metrics listening")
	done := context.AfterFunc(ctx, func() { _ = srv.Close() })
	return func() { done(); _ = srv.Close() }, nil
}

// idleTimeout closes a kept-alive HTTP connection that sent no request
// for this long (net/http keeps them forever by default).
const idleTimeout = 2 * time.Minute

func checkBind(addr string, authenticated bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	ip := net.ParseIP(host)
	if host == "localhost" || (ip != nil && ip.IsLoopback()) || authenticated {
		return nil
	}
	return ErrAuthRequired
}

// verifier builds the verifier of tenants' credentials, or nil when
// neither API keys nor JWTs are accepted.
func (o *IngressOptions) verifier(ctx context.Context, d *Deps) (auth.Verifier, error) {
	var (
		keys *auth.Keys
		jwt  *auth.JWT
		err  error
	)
	if o.APIKeys {
		if keys, err = auth.NewKeys(ctx, d.JS); err != nil {
			return nil, fmt.Errorf("api keys: %w", err)
		}
	}
	if c, ok := o.jwtConfig(); ok {
		if jwt, err = auth.NewJWT(ctx, c); err != nil {
			return nil, fmt.Errorf("jwt: %w", err)
		}
	}
	if keys == nil && jwt == nil {
		return nil, nil
	}
	return auth.Select(keys, jwt), nil
}

// LogFatal logs err and returns exit code 1.
func LogFatal(log zerolog.Logger, what string, err error) int {
	log.Error().Err(err).Msg(what)
	return 1
}
