package app

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/rs/zerolog"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/aggregator"
	"github.com/agentbus/agentbus/handlers/executor"
	"github.com/agentbus/agentbus/handlers/ledger"
	"github.com/agentbus/agentbus/handlers/memory"
	"github.com/agentbus/agentbus/handlers/monitor"
	"github.com/agentbus/agentbus/handlers/planner"
	"github.com/agentbus/agentbus/handlers/projector"
	"github.com/agentbus/agentbus/handlers/router"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/tools"
)

// Role declares one role in one value: its name, the routes of its handler
// (the event types it consumes, with the methods that handle them), the
// event types it may emit besides audit events, and how its handler is
// wired from a process's dependencies. Its durable consumer (stream and
// filter subjects), its dispatch, the emit checks, every process that runs
// it, the all-in-one and the benchmark derive from it.
type Role struct {
	Name string
	// Routes come from an unwired handler: a route names its type
	// whatever the handler's dependencies.
	Routes []events.Route
	Emits  []string
	// Unlimited: the role's messages wait in the stream while a
	// dependency is down instead of running out of deliveries.
	Unlimited bool
	// FlushOn, for a role that reads trails, reports the audit events
	// whose trail is written without the reader's linger
	// (events.WorkerConfig.FlushOn).
	FlushOn func(event.Event) bool
	// Buckets are the KV buckets its handler reads and writes (besides
	// the store's): with per-role NATS permissions it may touch no other.
	Buckets []string
	// ObjectStores are the object stores it reads and writes, as Buckets.
	ObjectStores []string
	// Publishes are the subjects it publishes on besides its events (the
	// system tools' outbound messages and flow requests).
	Publishes []string
	// Build wires the handler from d and returns its routes.
	Build func(ctx context.Context, d *Deps, log zerolog.Logger) ([]events.Route, error)
}

// Roles are the roles of agentbus.
var Roles = []Role{
	{Name: handlers.RoleRouter, Routes: (&router.Router{}).Routes(),
		Emits: []string{events.TypePlanRequested, events.TypeStepRequested, events.TypeRunFinished, events.TypeReplyChunk,
			events.TypeGroupDeadline, events.TypeRunDeadline, events.TypeApprovalDecided, events.TypeRunParked,
			events.TypeRunRequested}, // a session's next run, once the one before it ended
		Buckets: []string{handlers.BucketConfig, handlers.BucketCredentials, handlers.BucketSessions, handlers.BucketCancels,
			handlers.BucketLocks, ledger.BucketBudgets, ledger.BucketQuotas, runctl.BucketGates, runctl.BucketSessionRuns},
		Publishes: []string{tools.OutboundSubject("*")}, // a triggered run's answer to its conversation
		Build:     buildRouter},
	{Name: handlers.RolePlanner, Routes: (&planner.Planner{}).Routes(), Emits: []string{events.TypePlanProposed},
		Buckets: []string{handlers.BucketCredentials, ledger.BucketBudgets, ledger.BucketQuotas, handlers.BucketToolSecrets, handlers.BucketSessions,
			handlers.BucketConfig}, // the tenants' payload record choices
		Build: buildPlanner},
	{Name: handlers.RoleExecutor, Routes: (&executor.Executor{}).Routes(),
		Emits: []string{events.TypeStepIterated, events.TypeStepFinished, events.TypeStepJoined, events.TypeReplyChunk},
		Buckets: []string{handlers.BucketLocks, handlers.BucketToolcalls, handlers.BucketCredentials, handlers.BucketCancels,
			ledger.BucketBudgets, ledger.BucketQuotas, handlers.BucketConfig, runctl.BucketGates,
			handlers.BucketToolSecrets, handlers.BucketSessions, // the webhook and system tools (tools.Layer)
			ledger.BucketCircuits},
		Publishes:    tools.Subjects,                     // send_message, trigger_flow
		ObjectStores: []string{handlers.BucketArtifacts}, // the skill results' attachments (Deps.Skills)
		Build:        buildExecutor},
	{Name: handlers.RoleAggregator, Routes: (&aggregator.Aggregator{}).Routes(), Emits: []string{events.TypeGroupJoined},
		Buckets: []string{handlers.BucketFanin}, Build: buildAggregator},
	// The projector reads the trails of AGENT in batches, one process at
	// a time (events.Consumer.Single).
	{Name: handlers.RoleProjector, Routes: (&projector.Projector{}).Routes(), Unlimited: true,
		FlushOn: projector.ProjectorFlushOn, Emits: []string{events.TypeAlertEvaluate}, Build: buildProjector},
	{Name: handlers.RoleMonitor, Routes: (&monitor.Monitor{}).Routes(), Emits: []string{events.TypeAlertEvaluate},
		Buckets: []string{handlers.BucketAlerts}, Build: buildMonitor},
}

// IngressConsumes are the types the ingress reads for its callers.
var IngressConsumes = []string{events.TypeRunFinished, events.TypeReplyChunk, events.TypeRunParked}

// Topology is base with the consumers of every role and the buckets and
// object stores the roles use.
func Topology(base events.Topology) events.Topology {
	base.Consumers = nil
	for _, r := range Roles {
		base.Consumers = append(base.Consumers, r.Consumer())
	}
	// The inbound events, which the ingress consumes (ServeIngress): they
	// come from outside as plain JSON, so no Role's routes declare them.
	base.Consumers = append(base.Consumers, handlers.InboundConsumer)
	base.Buckets, base.ObjectStores = handlers.Buckets, handlers.ObjectStores
	return base
}

// RoleNamed returns the declaration of role.
func RoleNamed(name string) (Role, bool) {
	i := slices.IndexFunc(Roles, func(r Role) bool { return r.Name == name })
	if i < 0 {
		return Role{}, false
	}
	return Roles[i], true
}

// Consumer is the role's durable consumer, derived from its routes.
func (r Role) Consumer() events.Consumer {
	c := events.Consumer{Name: r.Name, Unlimited: r.Unlimited, Single: r.ReadsTrails()}
	for _, rt := range r.Routes {
		c.Stream = rt.Stream()
		if s := rt.Filter(); !slices.Contains(c.Filters, s) {
			c.Filters = append(c.Filters, s)
		}
	}
	return c
}

// ReadsTrails reports whether the role consumes audit events: its worker
// reads the trail each message of its stream carries.
func (r Role) ReadsTrails() bool {
	return slices.ContainsFunc(r.Routes, events.Route.ReadsTrails)
}

// consumes reports whether any route of the role takes events of typ.
func (r Role) consumes(typ string) bool {
	return slices.ContainsFunc(r.Routes, func(rt events.Route) bool { return rt.Matches(typ) })
}

// CheckRoles reports a declaration that would lose events: a type some
// role emits that no role (nor the ingress) consumes, or a role whose
// routes span two streams (one consumer reads one stream) or mix audit trails with events (one worker reads one or the other). Every process
// runs it at start.
func CheckRoles(roles []Role) error {
	for _, r := range roles {
		for _, typ := range r.Emits {
			if slices.Contains(IngressConsumes, typ) ||
				slices.ContainsFunc(roles, func(c Role) bool { return c.consumes(typ) }) {
				continue
			}
			return fmt.Errorf("role %s emits %s, which no role consumes: add a route for it to the consuming role", r.Name, typ)
		}
		if len(r.Routes) == 0 {
			return fmt.Errorf("role %s consumes nothing", r.Name)
		}
		for _, rt := range r.Routes {
			if rt.Stream() != r.Routes[0].Stream() {
				return fmt.Errorf("role %s consumes from %s and %s: one consumer reads one stream", r.Name, r.Routes[0].Stream(), rt.Stream())
			}
			if rt.ReadsTrails() != r.Routes[0].ReadsTrails() {
				return fmt.Errorf("role %s consumes audit trails and events: one worker reads a message's trail or the message", r.Name)
			}
		}
	}
	return nil
}

// checkRoutes reports a wired handler whose routes are not the declared
// ones: its consumer's filters would not match what it handles.
func (r Role) checkRoutes(built []events.Route) error {
	types := func(rs []events.Route) []string {
		var ts []string
		for _, rt := range rs {
			ts = append(ts, rt.Type)
		}
		slices.Sort(ts)
		return ts
	}
	if have, want := types(built), types(r.Routes); !slices.Equal(have, want) {
		return fmt.Errorf("role %s: its handler routes %v, but its declaration (and so its consumer filters) %v", r.Name, have, want)
	}
	return nil
}

// checkEmits wraps a role's handler so that an event of a type the role
// does not declare is refused: it would be stored where no role reads it.
func (r Role) checkEmits(h events.Handler) events.Handler {
	return func(ctx context.Context, ev event.Event) ([]event.Event, error) {
		outs, err := h(ctx, ev)
		if err != nil {
			return nil, err
		}
		for _, o := range outs {
			if !strings.HasPrefix(o.Type(), events.TypeAuditPrefix) && !slices.Contains(r.Emits, o.Type()) {
				return nil, events.Permanent(fmt.Errorf("role %s emitted %s, which it does not declare", r.Name, o.Type()))
			}
		}
		return outs, nil
	}
}

func buildRouter(ctx context.Context, d *Deps, log zerolog.Logger) ([]events.Route, error) {
	cfg, err := d.bucket(ctx, handlers.BucketConfig)
	if err != nil {
		return nil, err
	}
	if err := retry(ctx, func() error { return router.SeedConfig(ctx, cfg) }); err != nil {
		return nil, err
	}
	creds, err := d.Credentials(ctx)
	if err != nil {
		return nil, err
	}
	sessions, err := d.bucket(ctx, handlers.BucketSessions)
	if err != nil {
		return nil, err
	}
	cancels, err := d.Cancels(ctx)
	if err != nil {
		return nil, err
	}
	locks, err := d.bucket(ctx, handlers.BucketLocks)
	if err != nil {
		return nil, err
	}
	r := router.NewRouter(d.Models.Router, d.Store, cfg, log)
	r.JS = d.JS
	if err := retry(ctx, func() (err error) { r.Following, err = router.FollowConfig(ctx, cfg); return err }); err != nil {
		return nil, err
	}
	r.Synthesiser, r.Replies, r.Credentials = d.Models.Synthesiser, &handlers.Replies{JS: d.JS}, creds
	r.Sessions, r.Locks = &runctl.Sessions{KV: sessions}, locks
	r.Cancels = cancels
	gates, err := d.bucket(ctx, runctl.BucketGates)
	if err != nil {
		return nil, err
	}
	r.Gates = &runctl.Gates{KV: gates}
	sessionRuns, err := d.bucket(ctx, runctl.BucketSessionRuns)
	if err != nil {
		return nil, err
	}
	r.SessionRuns = &runctl.SessionRuns{KV: sessionRuns}
	r.Outbound = &tools.System{JS: d.JS}
	if r.Records, err = d.Records(ctx); err != nil {
		return nil, err
	}
	if r.Budgets, err = d.Budgets(ctx); err != nil {
		return nil, err
	}
	r.DailyTokens = float64(d.Config.DailyTokens())
	if d.Config.RecallTopK > 0 {
		r.Recall = &memory.Recall{Store: d.Store, Embedder: d.Embedder, TopK: d.Config.RecallTopK, Tokens: d.Config.RecallTokens}
	}
	return r.Routes(), nil
}

func buildPlanner(ctx context.Context, d *Deps, log zerolog.Logger) ([]events.Route, error) {
	creds, err := d.Credentials(ctx)
	if err != nil {
		return nil, err
	}
	layer, err := d.toolLayer(ctx, log)
	if err != nil {
		return nil, err
	}
	p := planner.NewPlanner(d.Models.Planner, layer, log)
	p.Credentials = creds
	if p.Records, err = d.Records(ctx); err != nil {
		return nil, err
	}
	if p.Budgets, err = d.Budgets(ctx); err != nil {
		return nil, err
	}
	return p.Routes(), nil
}

func buildExecutor(ctx context.Context, d *Deps, log zerolog.Logger) ([]events.Route, error) {
	locks, err := d.bucket(ctx, handlers.BucketLocks)
	if err != nil {
		return nil, err
	}
	calls, err := d.bucket(ctx, handlers.BucketToolcalls)
	if err != nil {
		return nil, err
	}
	creds, err := d.Credentials(ctx)
	if err != nil {
		return nil, err
	}
	cancels, err := d.Cancels(ctx)
	if err != nil {
		return nil, err
	}
	layer, err := d.toolLayer(ctx, log)
	if err != nil {
		return nil, err
	}
	x := executor.NewExecutor(d.Models.Executor, layer, d.Store, locks, calls, log)
	x.Credentials, x.Writer.Embedder, x.Cancels, x.Replies = creds, d.Embedder, cancels, &handlers.Replies{JS: d.JS}
	x.Writer.Retention = d.Config.MemoryRetention
	if d.Config.MaxTurns > 0 {
		x.MaxTurns = d.Config.MaxTurns
	}
	x.SkillTimeout = d.Config.SkillTimeout
	if x.Budgets, err = d.Budgets(ctx); err != nil {
		return nil, err
	}
	circuits, err := d.bucket(ctx, ledger.BucketCircuits)
	if err != nil {
		return nil, err
	}
	x.Breakers = &ledger.Breakers{Failures: d.Config.BreakerFailures, Cooldown: d.Config.BreakerCooldown,
		Shared: circuits, Log: log}
	if err := retry(ctx, func() error { return x.Breakers.Follow(ctx) }); err != nil {
		return nil, fmt.Errorf("circuits: %w", err)
	}
	cfg, err := d.bucket(ctx, handlers.BucketConfig)
	if err != nil {
		return nil, err
	}
	x.Modes = runctl.NewApprovalModes(cfg)
	if err := retry(ctx, func() error { return x.Modes.Start(ctx) }); err != nil {
		return nil, fmt.Errorf("approval modes: %w", err)
	}
	if x.Records, err = d.Records(ctx); err != nil {
		return nil, err
	}
	x.Untrusted = runctl.NewUntrustedPolicy(cfg)
	if err := retry(ctx, func() error { return x.Untrusted.Start(ctx) }); err != nil {
		return nil, fmt.Errorf("untrusted content policy: %w", err)
	}
	x.RepeatCallLimit, x.ContextTokens = d.Config.RepeatCallLimit, d.Config.ContextTokens
	gates, err := d.bucket(ctx, runctl.BucketGates)
	if err != nil {
		return nil, err
	}
	x.Gates = &runctl.Gates{KV: gates}
	if d.Config.SkillAPIKey != "" {
		x.Secrets = append(x.Secrets, d.Config.SkillAPIKey)
	}
	if sb := d.sandbox(ctx, log); sb != nil {
		x.Sandbox = sb
	}
	return x.Routes(), nil
}

func buildAggregator(ctx context.Context, d *Deps, log zerolog.Logger) ([]events.Route, error) {
	fanin, err := d.bucket(ctx, handlers.BucketFanin)
	if err != nil {
		return nil, err
	}
	return aggregator.NewAggregator(fanin, log).Routes(), nil
}

func buildProjector(ctx context.Context, d *Deps, log zerolog.Logger) ([]events.Route, error) {
	// The projector writes the store, and deletes the memories whose
	// retention has passed.
	go (&memory.Pruner{Store: d.Store}).Run(ctx, func(n int, err error) {
		switch {
		case err != nil:
			log.Warn().Err(err).Msg("memory prune")
		case n > 0:
			log.Info().Int("deleted", n).Msg("expired memories pruned")
		}
	})
	p := &projector.Projector{Store: d.Store, Embedder: d.Embedder, Alerts: true, Retention: d.Config.MemoryRetention}
	return p.Routes(), nil
}

func buildMonitor(ctx context.Context, d *Deps, log zerolog.Logger) ([]events.Route, error) {
	kv, err := d.bucket(ctx, handlers.BucketAlerts)
	if err != nil {
		return nil, err
	}
	m := &monitor.Monitor{Store: d.Store, KV: kv, Log: log}
	if d.Config.AlertWebhook != "" {
		m.Webhook = &monitor.Webhook{URL: d.Config.AlertWebhook, Secret: []byte(d.Config.alertSecret)}
	}
	return m.Routes(), nil
}
