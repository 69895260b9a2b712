package projector

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/memory"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// Projector writes the store's projections from the audit trails the
// messages of the AGENT stream carry (events.Trail): it indexes audit events into agent_events (the document id is the event id,
// so redelivery never duplicates) and writes the plan projection of every
// plan.projected event with version = seq, so a stale snapshot, however
// late or reordered, never overwrites a newer one. Each run.finished also
// writes the run's execution record (agent_executions; ExecutionRecord),
// whose id is the run's, so a redelivery rewrites the same record. While
// the store is down the events wait in the stream.
//
// Writes are group-committed: the events the worker hands over while a
// write is under way are written together by the next one (one bulk
// append, and of several snapshots of one plan only the newest), and each
// handler call returns once its own event is stored.
type Projector struct {
	Store ProjectionStore
	// WriteTimeout bounds one group write (default 10s). Every queued
	// event waits on the write under way, so a store call that hangs (a
	// request lost in a NATS restart) must fail soon and be redelivered,
	// not hold the whole projector for the handler's deadline.
	WriteTimeout time.Duration

	// Embedder embeds the exchanges written to the users' memory; nil
	// writes them without an embedding.
	Embedder store.Embedder
	// Retention sets the ttl_at of the exchanges it writes (user scope);
	// zero keeps them for ever.
	Retention store.MemoryRetention
	// Alerts: a stored run.finished schedules its tenant's alert
	// evaluation (alert.evaluate, to the monitor).
	Alerts bool
	// Now is the clock of the alert schedule; default time.Now.
	Now func() time.Time

	mu       sync.Mutex
	pending  []*projection
	flushing bool

	sessMu   sync.Mutex
	sessRevs map[string]uint64 // newest session revision written, by tenant.session

	alertMu sync.Mutex
	alerted map[string]string // the alert trigger last sent, by tenant
}

// ProjectorFlushOn reports the audit events whose trail the projector
// writes without lingering for more: what callers wait for (a run's end,
// a gate to decide, a queued run to cancel).
func ProjectorFlushOn(ev event.Event) bool {
	switch events.AuditName(ev.Type()) {
	case "run.finished", "gate.opened", handlers.AuditRunQueued:
		return true
	}
	return false
}

// projection is one event waiting to be written: an audit document or a
// plan projection. done receives its outcome; lead is closed when it is
// its handler's turn to write the pending batch.
type projection struct {
	doc  *store.Event
	plan *planAt
	done chan error
	lead chan struct{}
}

// planAt is a plan projection at a version: its snapshot, or the run
// state its event's carrier holds, decoded only if it is the newest of
// its plan in the batch written.
type planAt struct {
	id, tenant string
	version    int64
	snapshot   *store.Plan
	carrier    []byte
}

// Routes are the events the projector consumes: every audit event.
func (p *Projector) Routes() []events.Route {
	return []events.Route{events.OnPrefix(events.TypeAuditPrefix, p.index)}
}

// Handle is the projector's events.Handler.
func (p *Projector) Handle(ctx context.Context, ev event.Event) ([]event.Event, error) {
	return events.Dispatch(handlers.RoleProjector, p.Routes()...)(ctx, ev)
}

func (p *Projector) index(ctx context.Context, ev event.Event) ([]event.Event, error) {
	it := &projection{done: make(chan error, 1), lead: make(chan struct{})}
	name := events.AuditName(ev.Type())
	if name == runctl.AuditSessionUpdated {
		// The session and the exchange are written first; the event
		// itself is indexed into the trace like any other.
		if err := p.session(ctx, ev); err != nil {
			return nil, err
		}
	}
	switch name {
	case handlers.AuditPlanProjected:
		pa, err := planProjected(ctx, ev)
		if err != nil {
			return nil, err
		}
		it.plan = pa
	default:
		doc, err := AuditDoc(ev)
		if err != nil {
			return nil, err
		}
		if err := store.Validate(store.IndexEvents, doc); err != nil {
			return nil, events.Permanent(err)
		}
		it.doc = &doc
	}
	// The run's execution record, written before the event is
	// acknowledged: a failed write redelivers it, and the record is the
	// same.
	var (
		rec              store.Execution
		payloads, record bool
		recErr           error
	)
	if name == "run.finished" {
		rec, payloads, record, recErr = executionRecord(ev)
	}
	lead := p.enqueue(it)
	wait := func(ctx context.Context) error {
		if err := p.await(ctx, it, lead); err != nil || !payloads {
			return err
		}
		// A record with payload records reads them from the run's trace:
		// once the events of the batch, this one's included, are written.
		return p.execution(ctx, rec, true)
	}
	if !events.Defer(ctx, wait) { // in a batch, the hop's events are written together
		if err := wait(ctx); err != nil {
			return nil, err
		}
	}
	if recErr != nil {
		return nil, recErr
	}
	if record && !payloads {
		if err := p.execution(ctx, rec, false); err != nil {
			return nil, err
		}
	}
	if name == "run.finished" && p.Alerts {
		// The tenant's alert rules are evaluated a minute ahead, once
		// per tenant and minute however many runs finish: the trigger's
		// id is the tenant's and the minute's, and this process sends it
		// once a minute (another's, or a resend, is a duplicate).
		tenant := events.MetaOf(ev).Tenant
		trigger, err := handlers.AlertTrigger(ev, tenant, p.now())
		if err != nil || !p.firstTrigger(tenant, trigger.ID()) {
			return nil, err
		}
		return []event.Event{trigger}, nil
	}
	return nil, nil
}

// firstTrigger reports whether this process has not yet sent the alert
// trigger id of tenant (the trigger of a minute). A trigger whose publish
// failed is not sent again by this process; the next minute's is.
func (p *Projector) firstTrigger(tenant, id string) bool {
	p.alertMu.Lock()
	defer p.alertMu.Unlock()
	if p.alerted == nil || len(p.alerted) > 4096 {
		p.alerted = map[string]string{}
	}
	if p.alerted[tenant] == id {
		return false
	}
	p.alerted[tenant] = id
	return true
}

func (p *Projector) now() time.Time {
	if p.Now != nil {
		return p.Now().UTC()
	}
	return time.Now().UTC()
}

// enqueue queues it for the next write. The first caller to find no
// write under way leads: it must await it, which writes the queue; the
// others wait for their outcome or for their turn to write what queued up
// meanwhile.
func (p *Projector) enqueue(it *projection) (lead bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending = append(p.pending, it)
	lead = !p.flushing
	p.flushing = true
	return lead
}

// await returns the outcome of it, writing the queue when it leads or is
// picked to write next.
func (p *Projector) await(ctx context.Context, it *projection, lead bool) error {
	if !lead {
		// No deadline here: the write under way is bounded by its
		// writer's context, and a waiter picked to write next must write.
		select {
		case err := <-it.done:
			return err
		case <-it.lead:
		}
	}
	p.mu.Lock()
	batch := p.pending
	p.pending = nil
	p.mu.Unlock()
	p.writeAll(ctx, batch)
	p.mu.Lock()
	if len(p.pending) > 0 {
		close(p.pending[0].lead) // its handler writes the next batch
	} else {
		p.flushing = false
	}
	p.mu.Unlock()
	return <-it.done
}

// writeAll writes a batch; a panic fails every projection of it that has
// no outcome yet, so the queue behind it never waits forever.
func (p *Projector) writeAll(ctx context.Context, batch []*projection) {
	defer func() {
		if r := recover(); r != nil {
			err := fmt.Errorf("handlers: projector write panicked: %v", r)
			for _, it := range batch {
				select {
				case it.done <- err:
				default: // already answered
				}
			}
		}
	}()
	p.write(ctx, batch)
}

// write stores a batch and answers every projection in it: the audit
// documents in one append, and per plan only the newest projection.
func (p *Projector) write(ctx context.Context, batch []*projection) {
	ctx, cancel := context.WithTimeout(ctx, p.writeTimeout())
	defer cancel()
	var docs []store.Event
	var audits []*projection
	byPlan := map[string][]*projection{}
	var plans []string
	for _, it := range batch {
		if it.doc != nil {
			docs = append(docs, *it.doc)
			audits = append(audits, it)
			continue
		}
		id := it.plan.id
		if _, ok := byPlan[id]; !ok {
			plans = append(plans, id)
		}
		byPlan[id] = append(byPlan[id], it)
	}
	// The append and each plan's write are independent: they go at once,
	// so a batch costs about one round trip rather than one per plan.
	var wg sync.WaitGroup
	if len(docs) > 0 {
		wg.Go(func() {
			err := recovered(func() error { return p.Store.AppendEvents(ctx, docs) })
			switch {
			case errors.Is(err, store.ErrSchema):
				err = events.Permanent(err) // each was validated alone first
			case err != nil:
				err = fmt.Errorf("handlers: index audit events: %w", err)
			}
			for _, it := range audits {
				it.done <- err
			}
		})
	}
	for _, id := range plans {
		wg.Go(func() {
			its := byPlan[id]
			err := recovered(func() error { return p.putNewest(ctx, its) })
			for _, it := range its {
				select {
				case it.done <- err:
				default: // failed alone by putNewest
				}
			}
		})
	}
	wg.Wait()
}

// putNewest writes the newest projection of one plan among its. A
// projection that cannot be made (a carrier whose run state does not
// decode, or is not the event's plan) fails alone, and the newest of the
// others is written instead.
func (p *Projector) putNewest(ctx context.Context, its []*projection) error {
	its = slices.Clone(its)
	slices.SortStableFunc(its, func(a, b *projection) int { return cmp.Compare(b.plan.version, a.plan.version) })
	for _, it := range its {
		plan, err := it.plan.resolve()
		if err != nil {
			it.done <- err
			continue
		}
		return p.putPlan(ctx, plan, it.plan.version)
	}
	return nil
}

// recovered is fn's error, or its panic as one: a store call that panics
// fails its projections rather than the process.
func recovered(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handlers: projector write panicked: %v", r)
		}
	}()
	return fn()
}

// putPlan writes a plan projection. A stale write means a newer one is
// already stored.
func (p *Projector) putPlan(ctx context.Context, plan store.Plan, version int64) error {
	err := p.Store.PutPlan(ctx, plan, version)
	switch {
	case err == nil, errors.Is(err, store.ErrStale):
		return nil
	case errors.Is(err, store.ErrSchema):
		return events.Permanent(err)
	}
	return fmt.Errorf("handlers: write plan projection: %w", err)
}

// maxSessionRevs bounds the projector's memory of session revisions.
const maxSessionRevs = 10000

// session writes a session snapshot into agent_sessions, unless this
// process already wrote a newer one, and, when the run succeeded, its
// exchange into its user's memory, embedded, so later sessions can
// recall it: a failed run's answer never becomes long-term memory.
func (p *Projector) session(ctx context.Context, ev event.Event) error {
	var a events.Audit
	if err := events.Decode(ev, &a); err != nil {
		return err
	}
	var up runctl.SessionUpdated
	if err := json.Unmarshal(a.Payload, &up); err != nil {
		return events.Permanent(fmt.Errorf("%w: payload: %v", events.ErrInvalidData, err))
	}
	sess := up.Session
	if sess.TenantID != events.MetaOf(ev).Tenant || up.RunID == "" && up.Operator == "" || up.UserID == "" {
		return events.Permanent(fmt.Errorf("%w: payload: session of tenant %q from run %q on an event of tenant %q",
			events.ErrInvalidData, sess.TenantID, up.RunID, events.MetaOf(ev).Tenant))
	}
	if err := store.Validate(store.IndexSessions, sess); err != nil {
		return events.Permanent(err)
	}
	// Bounded like a group write: a store request lost in a NATS restart
	// must fail soon and be redelivered, not hold every session write
	// queued behind it (the lock below) for the handler's deadline.
	ctx, cancel := context.WithTimeout(ctx, p.writeTimeout())
	defer cancel()
	key := runctl.SessionKey(sess.TenantID, sess.SessionID)
	if err := p.putSession(ctx, key, up.Revision, sess); err != nil {
		return err
	}
	if up.HandedOff || up.Asking || up.Operator != "" {
		return nil // no exchange yet (the reply, or the answer, ends the run), or an operator's change
	}
	if up.Code != orch.CodeSuccess {
		return nil // an answer the run did not verify is not remembered
	}
	text := "user: " + up.Message + "\nassistant: " + up.Answer
	vec, err := memory.Embed(ctx, p.Embedder, text)
	if err != nil {
		return err
	}
	id := ExchangeKey(sess.TenantID, up.UserID, up.RunID)
	at := ev.Time().UTC()
	_, err = p.Store.PutMemory(ctx, store.Memory{ID: id, Key: id, TenantID: sess.TenantID, SessionID: sess.SessionID,
		UserID: up.UserID, Scope: memory.ScopeUser, Text: text, Embedding: vec, Source: "session", CreatedAt: at,
		TTLAt: p.Retention.TTLAt(memory.ScopeUser, at)})
	if errors.Is(err, store.ErrSchema) {
		return events.Permanent(err)
	}
	return err
}

// putSession writes a session snapshot unless this process already wrote
// a newer one; the lock keeps two snapshots of a session in order.
func (p *Projector) putSession(ctx context.Context, key string, rev uint64, sess store.Session) error {
	p.sessMu.Lock()
	defer p.sessMu.Unlock()
	if rev <= p.sessRevs[key] {
		return nil
	}
	if err := p.Store.PutSession(ctx, sess); err != nil {
		return fmt.Errorf("handlers: write session projection: %w", err)
	}
	if p.sessRevs == nil || len(p.sessRevs) >= maxSessionRevs {
		p.sessRevs = map[string]uint64{}
	}
	p.sessRevs[key] = rev
	return nil
}

// writeTimeout bounds one store write.
func (p *Projector) writeTimeout() time.Duration {
	if p.WriteTimeout > 0 {
		return p.WriteTimeout
	}
	return 10 * time.Second
}

// ExchangeKey is the memory key of a run's exchange in its user's memory.
// The "@" marks keep it apart from the session-scoped keys
// {tenant}:{session}:{task}:{label}, whose parts are ids and labels.
func ExchangeKey(tenantID, userID, runID string) string {
	return tenantID + ":@user:" + userID + ":@run:" + runID
}

// planProjected reads a plan.projected event: its plan's projection at
// its version, a snapshot or the run state of its carrier (see
// handlers.PlanProjected). A snapshot is checked here; a carrier's state
// is decoded and checked when it is written (planAt.resolve), and only
// if it is its plan's newest.
func planProjected(ctx context.Context, ev event.Event) (*planAt, error) {
	var a events.Audit
	if err := events.Decode(ev, &a); err != nil {
		return nil, err
	}
	var pp handlers.PlanProjected
	if err := json.Unmarshal(a.Payload, &pp); err != nil {
		return nil, events.Permanent(fmt.Errorf("%w: payload: %v", events.ErrInvalidData, err))
	}
	pa := &planAt{id: a.PlanID, tenant: events.MetaOf(ev).Tenant, version: pp.Version, snapshot: pp.Plan}
	if pa.id == "" || pa.version < 1 {
		return nil, events.Permanent(fmt.Errorf("%w: payload: plan %q at version %d", events.ErrInvalidData, pa.id, pa.version))
	}
	if pa.snapshot == nil {
		var ok bool
		if pa.carrier, ok = events.Carrier(ctx); !ok {
			return nil, events.Permanent(fmt.Errorf("%w: payload: plan %q at version %d has no snapshot and no carrier", events.ErrInvalidData, pa.id, pa.version))
		}
		return pa, nil
	}
	if err := pa.check(*pa.snapshot, pa.version); err != nil {
		return nil, err
	}
	return pa, nil
}

// resolve returns the projection: the snapshot, or the projection of the
// carrier's run state, which must be the event's plan at its version.
func (pa *planAt) resolve() (store.Plan, error) {
	if pa.snapshot != nil {
		return *pa.snapshot, nil
	}
	plan, seq, err := handlers.ProjectionOf(pa.carrier)
	if err != nil {
		return plan, events.Permanent(err)
	}
	return plan, pa.check(plan, seq)
}

// check holds a projection of version to the event that gave it: the
// event's plan, of the event's tenant, at the event's version, and a
// valid agent_plans document.
func (pa *planAt) check(plan store.Plan, version int64) error {
	if plan.PlanID != pa.id || plan.TenantID != pa.tenant || version != pa.version {
		return events.Permanent(fmt.Errorf("%w: payload: plan %q of tenant %q at version %d does not match the event's plan %q of tenant %q at version %d",
			events.ErrInvalidData, plan.PlanID, plan.TenantID, version, pa.id, pa.tenant, pa.version))
	}
	if err := store.Validate(store.IndexPlans, plan); err != nil {
		return events.Permanent(err)
	}
	return nil
}

// AuditDoc converts an audit event into its agent_events document.
func AuditDoc(ev event.Event) (store.Event, error) {
	var a events.Audit
	if err := events.Decode(ev, &a); err != nil {
		return store.Event{}, err
	}
	m := events.MetaOf(ev)
	payload := a.Payload
	if len(payload) == 0 {
		payload = json.RawMessage(`{}`)
	}
	doc := store.Event{
		EventID: ev.ID(), TenantID: m.Tenant, SessionID: m.Session, PlanID: a.PlanID, TaskID: a.TaskID,
		EventType: events.AuditName(ev.Type()), SkillID: a.SkillID, ScriptHash: a.ScriptHash,
		Payload: payload, TS: ev.Time(),
	}
	figures(&doc)
	return doc, nil
}

// figures copies the queryable figures of the events that have them from
// the payload into doc's own fields (Layer 3 of the monitoring: skill and
// model calls, steps, runs, extraction scripts, and memory writes, whose
// duration is their lock wait). A payload without them leaves them zero.
func figures(doc *store.Event) {
	var p struct {
		DurationMS    int64     `json:"duration_ms"`
		InputBytes    int       `json:"input_size_bytes"`
		ResponseBytes int       `json:"response_size_bytes"`
		Large         bool      `json:"large_response_triggered"`
		IsError       bool      `json:"is_error"`
		InputTokens   int       `json:"input_tokens"`
		OutputTokens  int       `json:"output_tokens"`
		CostUSD       float64   `json:"cost_usd"`
		LatencyMS     int64     `json:"latency_ms"`
		Error         string    `json:"error"`
		Status        string    `json:"status"`
		TerminalCode  string    `json:"terminal_code"`
		TaskType      string    `json:"task_type"`
		Replans       int       `json:"replans"`
		Reason        string    `json:"reason"`
		LockWaitMS    int64     `json:"lock_wait_ms"`
		Usage         llm.Usage `json:"usage"`
	}
	switch doc.EventType {
	case "skill.called", "model.called", "subagent.finish", "run.finished", "python_script.executed", "memory.written":
	default:
		return
	}
	if json.Unmarshal(doc.Payload, &p) != nil {
		return
	}
	okOr := func(failed bool) string {
		if failed {
			return "error"
		}
		return "ok"
	}
	switch doc.EventType {
	case "skill.called":
		doc.Outcome, doc.DurationMS = okOr(p.IsError), p.DurationMS
		doc.InputBytes, doc.ResponseBytes, doc.LargeResponse = p.InputBytes, p.ResponseBytes, p.Large
	case "model.called":
		doc.Outcome, doc.DurationMS = okOr(p.Error != ""), p.LatencyMS
		doc.InputTokens, doc.OutputTokens, doc.CostUSD = p.InputTokens, p.OutputTokens, p.CostUSD
	case "subagent.finish":
		doc.Outcome, doc.DurationMS = p.Status, p.DurationMS
	case "python_script.executed":
		doc.Outcome, doc.DurationMS = cmp.Or(p.Reason, "ok"), p.DurationMS
	case "memory.written":
		doc.DurationMS = p.LockWaitMS // how long the write waited for its memory lock
	case "run.finished":
		doc.Outcome, doc.TaskType, doc.Replans = p.TerminalCode, p.TaskType, p.Replans
		doc.InputTokens, doc.OutputTokens, doc.CostUSD = p.Usage.InputTokens, p.Usage.OutputTokens, p.Usage.CostUSD
	}
	// A figure is never negative (a clock step back, a hostile payload).
	doc.DurationMS, doc.Replans = max(doc.DurationMS, 0), max(doc.Replans, 0)
	doc.InputBytes, doc.ResponseBytes = max(doc.InputBytes, 0), max(doc.ResponseBytes, 0)
	doc.InputTokens, doc.OutputTokens, doc.CostUSD = max(doc.InputTokens, 0), max(doc.OutputTokens, 0), max(doc.CostUSD, 0)
}

// PlanStore keeps the versioned plan projections.
type PlanStore interface {
	PutPlan(ctx context.Context, p store.Plan, version int64) error
	GetPlan(ctx context.Context, tenantID, planID string) (store.Plan, int64, error)
}

// EventStore appends audit events; the same event id is stored once.
type EventStore interface {
	AppendEvents(ctx context.Context, evs []store.Event) error
	Trace(ctx context.Context, q store.TraceQuery) ([]store.Event, error)
}

// ProjectionStore is what the projector writes: audit events, plan and
// session projections, and the exchanges kept in users' memory.
type ProjectionStore interface {
	EventStore
	PutPlan(ctx context.Context, p store.Plan, version int64) error
	PutSession(ctx context.Context, s store.Session) error
	PutMemory(ctx context.Context, m store.Memory) (store.Memory, error)
	// PutExecution writes a run's execution record, replacing the one
	// of the same run.
	PutExecution(ctx context.Context, e store.Execution) error
}
