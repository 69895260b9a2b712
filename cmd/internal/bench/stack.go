package bench

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/cmd/internal/bench/pipeline"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
	"github.com/agentbus/agentbus/store/embedded"
)

// mode is a durability mode of the embedded server.
type mode struct {
	Name       string
	SyncAlways bool
}

var modes = []mode{{"default", false}, {"sync_always", true}}

// server starts an embedded nats-server in a temporary directory.
type benchServer struct {
	srv *server.Server
	dir string
}

func startServer(m mode) (*benchServer, error) {
	dir, err := os.MkdirTemp("", "agentbus-bench-")
	if err != nil {
		return nil, err
	}
	s, err := events.RunServer(events.ServerConfig{Port: -1, StoreDir: dir, SyncAlways: m.SyncAlways})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &benchServer{srv: s, dir: dir}, nil
}

func (b *benchServer) close() {
	b.srv.Shutdown()
	b.srv.WaitForShutdown()
	os.RemoveAll(b.dir)
}

// reset deletes every stream of the server, and so every KV bucket, with
// their consumers: the next load point starts on empty stores. A
// deployment bootstraps what it needs again.
func (b *benchServer) reset(ctx context.Context) error {
	nc, js, err := b.connect(false)
	if err != nil {
		return err
	}
	defer nc.Close()
	var names []string
	l := js.StreamNames(ctx)
	for name := range l.Name() {
		names = append(names, name)
	}
	if err := l.Err(); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	for _, name := range names {
		if err := js.DeleteStream(ctx, name); err != nil {
			return fmt.Errorf("reset: delete stream %s: %w", name, err)
		}
	}
	return nil
}

// connect opens a connection in-process (no socket) or over loopback TCP.
func (b *benchServer) connect(tcp bool) (*nats.Conn, jetstream.JetStream, error) {
	opts := []nats.Option{nats.Name("agentbus-bench")}
	if !tcp {
		opts = append(opts, nats.InProcessServer(b.srv))
	}
	nc, err := nats.Connect(b.srv.ClientURL(), opts...)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// deployment is every agentbus role on one server, with a number of
// executor instances (each its own connection and worker).
type deployment struct {
	srv    *benchServer
	conns  []*nats.Conn
	js     jetstream.JetStream // the client's connection
	store  *embedded.Store
	cancel context.CancelFunc
	wg     sync.WaitGroup
	runs   *runclient.Client
	// failed is cancelled, with the error as its cause, when a role stops.
	failed context.Context
	fail   context.CancelCauseFunc
}

type deployConfig struct {
	tcp       bool
	executors int
	model     llm.Model
	maxTurns  int
	// skillLatency is slept in every skill call.
	skillLatency time.Duration
	// externalExecutors leaves the executor role to other processes: the
	// deployment runs no executor of its own.
	externalExecutors bool
}

// deploy runs every role with the production wiring (app.Deps.RunRoles,
// the same declarations, middleware and defaults as the role processes),
// on the in-process pipeline skills and cfg's model, with cfg.executors
// executor instances, each on its own connection.
func deploy(ctx context.Context, srv *benchServer, cfg deployConfig) (*deployment, error) {
	d := &deployment{srv: srv}
	d.failed, d.fail = context.WithCancelCause(context.Background())
	nc, js, err := srv.connect(cfg.tcp)
	if err != nil {
		return nil, err
	}
	d.conns, d.js = append(d.conns, nc), js
	if err := events.Bootstrap(ctx, js, app.Topology(events.Topology{})); err != nil {
		d.close()
		return nil, err
	}
	if d.store, err = embedded.New(ctx, js, embedded.Config{}); err != nil {
		d.close()
		return nil, err
	}
	conf := app.DefaultConfig()
	if cfg.maxTurns > 0 {
		// A long loop calls its skill with the same arguments on purpose.
		conf.MaxTurns, conf.RepeatCallLimit = cfg.maxTurns, cfg.maxTurns
	}
	model := cfg.model
	emb, err := conf.Models.OpenEmbedder()
	if err != nil {
		d.close()
		return nil, err
	}
	deps := app.Deps{Embedder: emb, Config: conf, Log: zerolog.Nop(), NC: nc, JS: js, Store: d.store, Skills: pipeline.NewSkills(cfg.skillLatency),
		Models: app.Models{Router: model, Planner: model, Executor: model, Synthesiser: model}}
	// The roles outlive ctx but keep its values: the profile labels of
	// the contender being measured, to which each worker adds its role
	// and the event it handles.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	d.cancel = cancel
	d.start(runCtx, deps, handlers.RoleRouter, handlers.RolePlanner, handlers.RoleAggregator, handlers.RoleProjector)
	for range executorCount(cfg) {
		enc, ejs, err := srv.connect(cfg.tcp)
		if err != nil {
			d.close()
			return nil, err
		}
		d.conns = append(d.conns, enc)
		x := deps
		x.NC, x.JS = enc, ejs
		d.start(runCtx, x, handlers.RoleExecutor)
	}
	if d.runs, err = runclient.New(ctx, js, runclient.Config{Source: "bench"}); err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

// executorCount is the number of in-process executors cfg asks for: at
// least one, unless the executors run elsewhere.
func executorCount(cfg deployConfig) int {
	if cfg.externalExecutors {
		return 0
	}
	return max(cfg.executors, 1)
}

// start runs roles on deps until the deployment closes.
func (d *deployment) start(ctx context.Context, deps app.Deps, roles ...string) {
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		if err := deps.RunRoles(ctx, roles...); err != nil {
			d.fail(fmt.Errorf("roles %v: %w", roles, err))
		}
	}()
}

// run submits one run of task on NATS and waits for its result.
func (d *deployment) run(ctx context.Context, task string) (orch.RunResult, time.Duration, error) {
	id := uuid.NewString()
	// Each run is a new user's first, in a new session: it has no memory
	// in scope, so its recall is the one query that finds nothing (a
	// shared user would recall every earlier run's exchange).
	req := orch.RunRequest{RunID: id, TenantID: "bench", UserID: "u-" + id[:8], SessionID: "s-" + id[:8], Message: task}
	start := time.Now()
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(d.failed, cancel)()
	res, err := d.runs.Run(rctx, req)
	switch {
	case err != nil && context.Cause(d.failed) != nil:
		return orch.RunResult{}, 0, context.Cause(d.failed)
	case err != nil:
		return orch.RunResult{}, 0, err
	case res.TerminalCode != orch.CodeSuccess:
		return res, 0, fmt.Errorf("run %s ended %s: %s", id, res.TerminalCode, res.Reason)
	}
	return res, time.Since(start), nil
}

func (d *deployment) close() {
	if d.cancel != nil {
		d.cancel()
	}
	d.wg.Wait()
	if d.runs != nil {
		d.runs.Close()
	}
	for _, c := range d.conns {
		c.Close()
	}
}

// stamp is one stored orchestration event of a run.
type stamp struct {
	typ string
	ts  time.Time
}

// storedRuns reads the AGENT stream once and returns every run's events in
// stream order with their stored timestamps.
func storedRuns(ctx context.Context, js jetstream.JetStream) (map[string][]stamp, error) {
	stream, err := js.Stream(ctx, events.StreamAgent)
	if err != nil {
		return nil, err
	}
	// One consumer read to the end: an ordered consumer's Next would
	// create a new server-side consumer, and count its pending messages
	// over the whole stream, for every message.
	c, err := stream.CreateConsumer(ctx, jetstream.ConsumerConfig{FilterSubjects: []string{"agent.*.*.bench"},
		AckPolicy: jetstream.AckNonePolicy, MemoryStorage: true, InactiveThreshold: time.Minute})
	if err != nil {
		return nil, err
	}
	defer func() { _ = stream.DeleteConsumer(context.WithoutCancel(ctx), c.CachedInfo().Name) }()
	runs := map[string][]stamp{}
	for pending := c.CachedInfo().NumPending; pending > 0; {
		batch, err := c.Fetch(int(min(pending, 1000)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, err
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			md, err := msg.Metadata()
			if err != nil {
				return nil, err
			}
			id := msg.Headers().Get("ce-" + events.ExtRun)
			runs[id] = append(runs[id], stamp{typ: msg.Headers().Get("ce-type"), ts: md.Timestamp})
			pending = md.NumPending
		}
		if err := batch.Error(); err != nil {
			return nil, err
		}
		if got == 0 {
			break
		}
	}
	return runs, nil
}
