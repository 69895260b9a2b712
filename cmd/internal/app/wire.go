package app

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/executor"
	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/handlers/ledger"
	"github.com/agentbus/agentbus/handlers/memory"
	"github.com/agentbus/agentbus/handlers/planner"
	"github.com/agentbus/agentbus/handlers/projector"
	"github.com/agentbus/agentbus/handlers/router"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/metrics"
	"github.com/agentbus/agentbus/sandbox"
	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/store"
	"github.com/agentbus/agentbus/store/embedded"
	"github.com/agentbus/agentbus/store/opensearch"
	"github.com/agentbus/agentbus/tools"
	"github.com/agentbus/agentbus/tracing"
)

// Logger returns a JSON logger on stderr carrying the process name.
func Logger(process, level string) zerolog.Logger {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil {
		lvl = zerolog.InfoLevel
	}
	return zerolog.New(os.Stderr).Level(lvl).With().Timestamp().Str("process", process).Logger()
}

// Store is everything the processes need from the storage adapter; both
// backends provide it.
type Store interface {
	router.RouterStore
	memory.MemoryStore
	projector.ProjectionStore
	ingress.IngressStore
	PruneMemory(ctx context.Context, before time.Time) (int, error)
	Close() error
}

var (
	_ Store = (*embedded.Store)(nil)
	_ Store = (*opensearch.Store)(nil)
)

// openStore opens the configured backend: the embedded one on the NATS
// connection, or OpenSearch configured by the OPENSEARCH_* environment.
func openStore(ctx context.Context, c *Config, js jetstream.JetStream) (Store, error) {
	if c.Store != "opensearch" {
		return retryValue(ctx, func() (*embedded.Store, error) {
			return embedded.New(ctx, js, c.embeddedConfig())
		})
	}
	cfg := openSearchConfig()
	if c.StorePrefix != "" {
		cfg.IndexPrefix = c.StorePrefix
	}
	cfg.ExecutionTTL = c.ExecutionTTL
	if !envOpenSearchRetention.IsSet() && c.EventRetention > 0 {
		cfg.EventRetention = c.EventRetention
	}
	// The index holds what the embedder writes: OPENSEARCH_DIMENSION, when
	// set, is the embedder's too; otherwise the index takes the embedder's.
	switch dim := c.Models.EmbeddingDimension; {
	case !envOpenSearchDimension.IsSet():
		if dim > 0 {
			cfg.Dimension = dim
		}
	case envEmbeddingDimension.IsSet() && dim != cfg.Dimension:
		return nil, fmt.Errorf("OPENSEARCH_DIMENSION %d differs from EMBEDDING_DIMENSION %d", cfg.Dimension, dim)
	default:
		c.Models.EmbeddingDimension = cfg.Dimension
	}
	var st *opensearch.Store
	err := retry(ctx, func() error {
		var err error
		st, err = opensearch.New(ctx, cfg)
		return err
	})
	return st, err
}

// embeddedConfig is the embedded store's configuration.
func (c *Config) embeddedConfig() embedded.Config {
	return embedded.Config{Prefix: c.StorePrefix, Replicas: c.Replicas, ExecutionTTL: c.ExecutionTTL,
		EventRetention: c.EventRetention}
}

// openSearchConfig is the OpenSearch store's configuration from the
// OPENSEARCH_* variables.
func openSearchConfig() opensearch.Config {
	cfg := opensearch.Config{Username: envOpenSearchUser.Value(), Password: envOpenSearchPassword.Value(),
		CAFile: envOpenSearchCA.Value(), InsecureSkipVerify: envOpenSearchInsecure.Value(), IndexPrefix: envOpenSearchPrefix.Value(),
		Dimension: envOpenSearchDimension.Value(), ISM: opensearch.ISMMode(envOpenSearchISM.Value())}
	if envOpenSearchURL.IsSet() {
		for u := range strings.SplitSeq(envOpenSearchURL.Value(), ",") {
			if u = strings.TrimSpace(u); u != "" {
				cfg.URLs = append(cfg.URLs, u)
			}
		}
	}
	if envOpenSearchRetention.IsSet() {
		cfg.EventRetention = envOpenSearchRetention.Value()
	}
	if region := envOpenSearchRegion.Value(); region != "" {
		cfg.AWS = &opensearch.AWSConfig{Region: region, Service: envOpenSearchService.Value()}
	}
	return cfg
}

// Skills is what the roles need from the skills: the planner finds them,
// the executor calls them.
type Skills interface {
	planner.SkillFinder
	executor.SkillCaller
	Close() error
}

// Deps are the connections a process works with.
type Deps struct {
	Config *Config
	Log    zerolog.Logger
	NC     *nats.Conn
	JS     jetstream.JetStream
	Store  Store
	Skills Skills
	Models Models
	// Embedder embeds what is written to memory and the memory queries.
	Embedder store.Embedder
	// stopTracing flushes the process's spans (tracing.Setup).
	stopTracing func(context.Context) error
}

// Connect dials NATS (retrying until ctx ends), bootstraps the topology
// and opens the store, skill client and model.
func Connect(ctx context.Context, process string, c *Config, log zerolog.Logger) (*Deps, error) {
	if err := CheckRoles(Roles); err != nil {
		return nil, fmt.Errorf("roles: %w", err)
	}
	stopTracing, err := tracing.Setup(ctx, process, envOTLPEndpoint.IsSet() || envOTLPTracesEndpoint.IsSet())
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	if tracing.Enabled() {
		log.Info().Msg("exporting traces over OTLP (OTEL_EXPORTER_OTLP_ENDPOINT)")
	}
	opts := []nats.Option{nats.Name("agentbus-" + process)}
	if c.NATSUser != "" {
		opts = append(opts, nats.UserInfo(c.NATSUser, c.NATSPassword))
	}
	if c.inProcess != nil {
		// No socket: each message costs no system calls on either side
		// (measured by make bench's all-in-one throughput).
		opts = append(opts, nats.InProcessServer(c.inProcess))
	}
	nc, err := nats.Connect(c.NATSURL, append(opts, nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true), nats.ReconnectWait(250*time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn().Err(err).Msg("nats disconnected")
			}
		}),
		nats.ReconnectHandler(func(*nats.Conn) { log.Info().Msg("nats reconnected") }),
		// A permissions violation is reported here, asynchronously.
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { log.Error().Err(err).Msg("nats") }))...)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", c.NATSURL, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	bootstrap := func() error {
		if err := c.resolveReplicas(nc); err != nil {
			return err
		}
		return events.Bootstrap(ctx, js, Topology(events.Topology{AckWait: c.AckWait, MaxDeliver: c.MaxDeliver, Replicas: c.Replicas}))
	}
	if err := retry(ctx, bootstrap); err != nil {
		nc.Close()
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	st, err := openStore(ctx, c, js)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("store: %w", err)
	}
	skCfg, err := c.SkillsConfig()
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("skills: %w", err)
	}
	// The executor's skill calls store their results' attachments by
	// reference; no other role calls a skill.
	skCfg.Attachments, err = retryValue(ctx, func() (*handlers.Attachments, error) { return handlers.NewAttachments(ctx, js) })
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("attachments: %w", err)
	}
	sk, err := skills.NewClient(skCfg)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("skills: %w", err)
	}
	models, err := c.Models.Open(ctx)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("models: %w", err)
	}
	emb, err := c.Models.OpenEmbedder()
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("embedder: %w", err)
	}
	return &Deps{Config: c, Log: log, NC: nc, JS: js, Store: st, Skills: sk, Models: models, Embedder: emb,
		stopTracing: stopTracing}, nil
}

// retry calls fn until it succeeds or ctx ends, so a process may start
// before its NATS server.
func retry(ctx context.Context, fn func() error) error {
	for {
		err := fn()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// retryValue is retry for a call that returns a value. Every NATS call a
// process makes while it starts goes through retry: NATS may restart
// between the bootstrap and the consumers being set up, and the process
// must wait for it rather than exit.
func retryValue[T any](ctx context.Context, fn func() (T, error)) (T, error) {
	var v T
	err := retry(ctx, func() error {
		var err error
		v, err = fn()
		return err
	})
	return v, err
}

// Close releases the connections and flushes the process's spans.
func (d *Deps) Close() {
	if d.stopTracing != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = d.stopTracing(ctx)
		cancel()
	}
	_ = d.Skills.Close()
	_ = d.Store.Close()
	d.NC.Close()
}

// Handler wires the handler of role from d.
func (d *Deps) Handler(ctx context.Context, role string) (events.Handler, error) {
	decl, ok := RoleNamed(role)
	if !ok {
		return nil, fmt.Errorf("unknown role %q", role)
	}
	routes, err := decl.Build(ctx, d, d.Log.With().Str("role", role).Logger())
	if err != nil {
		return nil, err
	}
	if err := decl.checkRoutes(routes); err != nil {
		return nil, err
	}
	return decl.checkEmits(events.Dispatch(role, routes...)), nil
}

// bucket opens a KV bucket, waiting for NATS.
func (d *Deps) bucket(ctx context.Context, name string) (jetstream.KeyValue, error) {
	kv, err := retryValue(ctx, func() (jetstream.KeyValue, error) { return d.JS.KeyValue(ctx, name) })
	return events.BoundKV(kv, 0), err
}

// RunRoles runs the workers of roles until ctx ends, then drains them.
func (d *Deps) RunRoles(ctx context.Context, roles ...string) error {
	errs := make(chan error, len(roles))
	for _, role := range roles {
		h, err := d.Handler(ctx, role)
		if err != nil {
			return fmt.Errorf("%s: %w", role, err)
		}
		decl, _ := RoleNamed(role)
		cons, err := retryValue(ctx, func() (jetstream.Consumer, error) { return d.JS.Consumer(ctx, decl.Consumer().Stream, role) })
		if err != nil {
			return fmt.Errorf("%s consumer: %w", role, err)
		}
		log := d.Log.With().Str("role", role).Logger()
		mw := []events.Middleware{events.Recover(), handlers.Logging(log), events.Timeout(d.Config.HandleTimeout)}
		if tracing.Enabled() {
			mw = append([]events.Middleware{tracing.Middleware(role)}, mw...)
		}
		h = events.Chain(h, mw...)
		metrics.WatchConsumer(role, cons)
		w, err := retryValue(ctx, func() (*events.Worker, error) {
			return events.NewWorker(ctx, d.JS, cons, h, events.WorkerConfig{
				Role: role, Concurrency: d.Config.Concurrency, OnDone: metrics.Done(role), Trails: decl.ReadsTrails(), FlushOn: decl.FlushOn,
				RoutesDecode: true, // Handler: a Dispatch of the role's routes
				OnError: func(ev *event.Event, subject string, err error) {
					l := log.Warn().Err(err).Str("subject", subject)
					if ev != nil {
						l = l.Str("event_id", ev.ID()).Str("run_id", events.Ext(*ev, events.ExtRun))
					}
					l.Msg("message not handled")
				},
				OnSlow: func(ev event.Event, held time.Duration) {
					log.Warn().Str("type", ev.Type()).Str("event_id", ev.ID()).Str("run_id", events.Ext(ev, events.ExtRun)).
						Dur("held_ms", held).Msg("message still being handled; its heartbeats keep it from redelivery")
				},
			})
		})
		if err != nil {
			return err
		}
		go func() { errs <- w.Run(ctx) }()
		log.Info().Msg("consuming")
	}
	var first error
	for range roles {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Credentials returns the store of forwarded API keys.
func (d *Deps) Credentials(ctx context.Context) (*runctl.Credentials, error) {
	kv, err := d.bucket(ctx, handlers.BucketCredentials)
	if err != nil {
		return nil, fmt.Errorf("credentials bucket: %w", err)
	}
	return &runctl.Credentials{KV: kv}, nil
}

// Cancels returns the cancelled runs, following the cancels bucket until
// ctx ends.
func (d *Deps) Cancels(ctx context.Context) (*runctl.Cancels, error) {
	kv, err := d.bucket(ctx, handlers.BucketCancels)
	if err != nil {
		return nil, fmt.Errorf("cancels bucket: %w", err)
	}
	c := runctl.NewCancels(kv)
	if err := retry(ctx, func() error { return c.Start(ctx) }); err != nil {
		return nil, fmt.Errorf("cancels: %w", err)
	}
	return c, nil
}

// Records are the tenants' payload record choices, followed from the
// config bucket.
func (d *Deps) Records(ctx context.Context) (*runctl.RecordPolicy, error) {
	kv, err := d.bucket(ctx, handlers.BucketConfig)
	if err != nil {
		return nil, fmt.Errorf("config bucket: %w", err)
	}
	p := runctl.NewRecordPolicy(kv)
	if err := retry(ctx, func() error { return p.Start(ctx) }); err != nil {
		return nil, fmt.Errorf("payload records: %w", err)
	}
	return p, nil
}

// Budgets is the budget ledger on the budgets bucket, with the token
// quotas' ledgers on the quotas bucket.
func (d *Deps) Budgets(ctx context.Context) (*ledger.Budgets, error) {
	kv, err := d.bucket(ctx, ledger.BucketBudgets)
	if err != nil {
		return nil, fmt.Errorf("budgets bucket: %w", err)
	}
	quotas, err := d.bucket(ctx, ledger.BucketQuotas)
	if err != nil {
		return nil, fmt.Errorf("quotas bucket: %w", err)
	}
	return &ledger.Budgets{KV: kv, Quotas: quotas}, nil
}

// sandbox opens the extraction sandbox and starts its sweeper, or returns
// nil, logging why: the executor then reports large responses to the model
// as errors instead of running scripts unconfined.
func (d *Deps) sandbox(ctx context.Context, log zerolog.Logger) *sandbox.Sandbox {
	sb, err := sandbox.New(sandbox.Config{AllowUnsafeNoIsolation: d.Config.SandboxUnsafe})
	if err != nil {
		log.Error().Err(err).Msg("no sandbox: large skill responses will fail their step (run deploy/sandbox/setup.sh)")
		return nil
	}
	if sb.Isolation() == sandbox.IsolationNone {
		log.Warn().Msg("SANDBOX ISOLATION IS OFF (development flag): extraction scripts run unconfined on this host")
	} else {
		log.Info().Str("isolation", sb.Isolation()).Msg("sandbox ready")
	}
	go func() {
		_ = sb.RunSweeper(ctx, 10*time.Minute, time.Hour, func(err error) { log.Warn().Err(err).Msg("sandbox sweep") })
	}()
	return sb
}

// ToolSecrets returns the webhook tools' secret store, sealed with the
// configured key (Config.SecretsKey); without a key it refuses writes.
func (d *Deps) ToolSecrets(ctx context.Context) (*tools.Secrets, error) {
	kv, err := d.bucket(ctx, handlers.BucketToolSecrets)
	if err != nil {
		return nil, fmt.Errorf("tool secrets bucket: %w", err)
	}
	key, err := d.Config.SecretsKey()
	if err != nil {
		return nil, err
	}
	return tools.NewSecrets(kv, key)
}

// toolLayer wraps the skills with the system tools and the tenants'
// webhook tools (tools.Layer), for the planner and the executor.
func (d *Deps) toolLayer(ctx context.Context, log zerolog.Logger) (*tools.Layer, error) {
	secrets, err := d.ToolSecrets(ctx)
	if err != nil {
		return nil, err
	}
	sessions, err := d.bucket(ctx, handlers.BucketSessions)
	if err != nil {
		return nil, err
	}
	policy, err := d.Config.EgressPolicy()
	if err != nil {
		return nil, err
	}
	return &tools.Layer{Next: d.Skills, Defs: d.Store,
		System: &tools.System{JS: d.JS, Memory: d.Store, Sessions: &runctl.Sessions{KV: sessions},
			Retention: d.Config.MemoryRetention},
		Webhooks: &tools.Webhooks{Secrets: secrets, Egress: policy,
			Log: log.With().Str("component", "webhook_tools").Logger()}}, nil
}
