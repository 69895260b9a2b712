package runctl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/kvcas"
	"github.com/agentbus/agentbus/orch"
)

// ErrRunCancelled is the cause of a context that Cancels.Watch cancelled:
// the run was cancelled while work of it was in flight.
var ErrRunCancelled = errors.New("handlers: run cancelled")

// Cancel is a request to cancel a run: who asked and when. It is the
// value of the run's key in the cancels bucket.
type Cancel struct {
	By string    `json:"by,omitempty"`
	At time.Time `json:"at,omitzero"`
	// Reason is CancelTimeout when the run's deadline stopped it.
	Reason string `json:"reason,omitempty"`
}

// CancelTimeout is the Reason of a cancel written at a run's deadline.
const CancelTimeout = "timeout"

// Cancels are the cancelled runs. The key <tenant>.<run_id> of the cancels
// bucket cancels a run: the ingress writes it (Request), and so may any
// NATS client, with any value (a Cancel, or anything else: the entry's
// time is then the request's):
//
//	nats kv put cancels acme.<run_id> '{"by":"ops"}'
//
// Once started, Cancels follows the bucket into memory, so the router and
// the executor check every message of theirs without a round trip, and
// the executor's work in flight for a run stops as soon as its key shows
// up (Watch). A nil *Cancels has no cancelled run.
type Cancels struct {
	kv jetstream.KeyValue

	mu         sync.Mutex
	runs       map[string]cancelEntry
	interrupts map[string]Interrupt            // by run key
	steers     map[string][]Steer              // by run key
	inflight   map[string]map[*flight]struct{} // by key
}

// Interrupt asks a run to park before its next hop (POST
// /agent/runs/{run_id}/interrupt): key <tenant>.<run_id>.interrupt of the
// cancels bucket. ID tells interrupts apart: the run honours each once.
type Interrupt struct {
	ID string    `json:"id"`
	By string    `json:"by,omitempty"`
	At time.Time `json:"at,omitzero"`
}

// Steer is a user message added to a running run (POST
// /agent/runs/{run_id}/steer): every later model turn of its steps sees
// it. The run's steers are key <tenant>.<run_id>.steer of the cancels
// bucket.
type Steer struct {
	ID      string    `json:"id"`
	Message string    `json:"message"`
	By      string    `json:"by,omitempty"`
	At      time.Time `json:"at,omitzero"`
}

// Run-control key suffixes of the cancels bucket.
const (
	suffixInterrupt = ".interrupt"
	suffixSteer     = ".steer"
)

// MaxSteers bounds the steering messages of one run; MaxSteerBytes one
// message.
const (
	MaxSteers     = 16
	MaxSteerBytes = 4 << 10
)

// ErrTooManySteers refuses a steer past MaxSteers.
var ErrTooManySteers = fmt.Errorf("handlers: a run takes at most %d steering messages", MaxSteers)

// cancelEntry is a cancel in memory, with the time its entry was stored.
type cancelEntry struct {
	Cancel
	stored time.Time
}

// flight is a piece of work in flight for a run: Watch's context.
type flight struct{ cancel context.CancelCauseFunc }

// NewCancels returns the cancels of the bucket kv. Call Start to follow
// it; Request needs no Start.
func NewCancels(kv jetstream.KeyValue) *Cancels {
	return &Cancels{kv: kv, runs: map[string]cancelEntry{}, interrupts: map[string]Interrupt{}, steers: map[string][]Steer{},
		inflight: map[string]map[*flight]struct{}{}}
}

// cancelKey is the bucket key of a run: tenant and run id are subject
// tokens, checked by the caller.
func cancelKey(tenant, runID string) string { return tenant + "." + runID }

// Request cancels run runID of tenant. It reports false if the run was
// already cancelled: the first request is kept.
func (c *Cancels) Request(ctx context.Context, tenant, runID string, req Cancel) (bool, error) {
	for _, id := range []struct{ field, v string }{{"tenant_id", tenant}, {"run_id", runID}} {
		if err := orch.ValidateID(id.field, id.v); err != nil {
			return false, err
		}
	}
	b, err := json.Marshal(req)
	if err != nil {
		return false, err
	}
	_, err = c.kv.Create(ctx, cancelKey(tenant, runID), b)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("handlers: request cancel: %w", err)
	}
	return true, nil
}

// RequestInterrupt asks run runID of tenant to park before its next hop.
func (c *Cancels) RequestInterrupt(ctx context.Context, tenant, runID string, i Interrupt) error {
	b, err := json.Marshal(i)
	if err != nil {
		return err
	}
	if _, err := c.kv.Put(ctx, cancelKey(tenant, runID)+suffixInterrupt, b); err != nil {
		return fmt.Errorf("handlers: request interrupt: %w", err)
	}
	return nil
}

// AddSteer appends a steering message to run runID of tenant.
func (c *Cancels) AddSteer(ctx context.Context, tenant, runID string, st Steer) error {
	_, err := kvcas.Update(ctx, c.kv, cancelKey(tenant, runID)+suffixSteer, func(list *[]Steer, _ uint64) (bool, error) {
		if len(*list) >= MaxSteers {
			return false, ErrTooManySteers
		}
		*list = append(*list, st)
		return true, nil
	})
	if err != nil && !errors.Is(err, ErrTooManySteers) {
		return fmt.Errorf("handlers: steer: %w", err)
	}
	return err
}

// Start loads every cancel of the bucket, then follows the bucket until
// ctx ends. It returns once the stored cancels are loaded, so the first
// message handled after it already sees them.
func (c *Cancels) Start(ctx context.Context) error {
	w, err := c.watch(ctx)
	if err != nil {
		return err
	}
	ttl := time.Duration(0)
	if st, err := c.kv.Status(ctx); err == nil {
		ttl = st.TTL()
	}
	go c.follow(ctx, w, ttl)
	return nil
}

// watch starts a watcher of the bucket and applies its entries up to the
// stored ones.
func (c *Cancels) watch(ctx context.Context) (jetstream.KeyWatcher, error) {
	w, err := c.kv.WatchAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("handlers: watch cancels: %w", err)
	}
	for {
		select {
		case <-ctx.Done():
			_ = w.Stop()
			return nil, ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("handlers: watch cancels: the watcher closed")
			}
			if e == nil { // every stored entry has been delivered
				return w, nil
			}
			c.apply(e)
		}
	}
}

// follow applies the bucket's updates until ctx ends, watching again if
// the watcher closes, and forgets the cancels older than the bucket's TTL
// (their entries expired: no run of theirs is left).
func (c *Cancels) follow(ctx context.Context, w jetstream.KeyWatcher, ttl time.Duration) {
	var sweep <-chan time.Time
	if ttl > 0 {
		t := time.NewTicker(min(ttl, time.Hour))
		defer t.Stop()
		sweep = t.C
	}
	for {
		select {
		case <-ctx.Done():
			_ = w.Stop()
			return
		case now := <-sweep:
			c.forget(now.Add(-ttl))
		case e, ok := <-w.Updates():
			if ok {
				if e != nil {
					c.apply(e)
				}
				continue
			}
			for w = nil; w == nil && ctx.Err() == nil; {
				var err error
				if w, err = c.watch(ctx); err != nil {
					select {
					case <-ctx.Done():
					case <-time.After(time.Second):
					}
				}
			}
			if w == nil {
				return
			}
		}
	}
}

// apply records one entry of the bucket and stops the work in flight of
// a run it cancels.
func (c *Cancels) apply(e jetstream.KeyValueEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	put := e.Operation() == jetstream.KeyValuePut
	if run, ok := strings.CutSuffix(e.Key(), suffixInterrupt); ok {
		var i Interrupt
		if !put || json.Unmarshal(e.Value(), &i) != nil || i.ID == "" {
			delete(c.interrupts, run)
			return
		}
		if i.At.IsZero() {
			i.At = e.Created()
		}
		c.interrupts[run] = i
		return
	}
	if run, ok := strings.CutSuffix(e.Key(), suffixSteer); ok {
		var list []Steer
		if !put || json.Unmarshal(e.Value(), &list) != nil {
			delete(c.steers, run)
			return
		}
		c.steers[run] = list
		return
	}
	if !put {
		delete(c.runs, e.Key())
		return
	}
	var req Cancel
	_ = json.Unmarshal(e.Value(), &req) // any value cancels
	if req.At.IsZero() {
		req.At = e.Created()
	}
	c.runs[e.Key()] = cancelEntry{Cancel: req, stored: e.Created()}
	for f := range c.inflight[e.Key()] {
		f.cancel(ErrRunCancelled)
	}
}

// forget drops the cancels stored before cutoff.
func (c *Cancels) forget(cutoff time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.runs {
		if e.stored.Before(cutoff) {
			delete(c.runs, k)
		}
	}
	for k, i := range c.interrupts {
		if i.At.Before(cutoff) {
			delete(c.interrupts, k)
		}
	}
	for k, list := range c.steers {
		if len(list) == 0 || list[len(list)-1].At.Before(cutoff) {
			delete(c.steers, k)
		}
	}
}

// Lookup returns the cancel of run runID of tenant, if it was cancelled.
func (c *Cancels) Lookup(tenant, runID string) (Cancel, bool) {
	if c == nil {
		return Cancel{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.runs[cancelKey(tenant, runID)]
	return e.Cancel, ok
}

// Interrupt returns the latest interrupt of run runID of tenant, if any.
func (c *Cancels) Interrupt(tenant, runID string) (Interrupt, bool) {
	if c == nil {
		return Interrupt{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	i, ok := c.interrupts[cancelKey(tenant, runID)]
	return i, ok
}

// Steers returns the steering messages of run runID of tenant, oldest
// first.
func (c *Cancels) Steers(tenant, runID string) []Steer {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.steers[cancelKey(tenant, runID)]
}

// Watch returns a context derived from ctx that is cancelled, with cause
// ErrRunCancelled, as soon as the run is cancelled (at once if it is), and
// the function that releases it once the work is done.
func (c *Cancels) Watch(ctx context.Context, tenant, runID string) (context.Context, func()) {
	if c == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	f, key := &flight{cancel: cancel}, cancelKey(tenant, runID)
	c.mu.Lock()
	if _, ok := c.runs[key]; ok {
		cancel(ErrRunCancelled)
	}
	if c.inflight[key] == nil {
		c.inflight[key] = map[*flight]struct{}{}
	}
	c.inflight[key][f] = struct{}{}
	c.mu.Unlock()
	return ctx, func() {
		c.mu.Lock()
		delete(c.inflight[key], f)
		if len(c.inflight[key]) == 0 {
			delete(c.inflight, key)
		}
		c.mu.Unlock()
		cancel(nil)
	}
}
