package memory

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/handlers/internal/kvs"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/schema"
	"github.com/agentbus/agentbus/store"
)

// Memory errors.
var (
	// ErrMemoryLock is the MemoryLockError of seed 000 §4.2: another task
	// held the key for longer than the lock wait.
	ErrMemoryLock = errors.New("handlers: memory lock not acquired")
	// ErrBadLabel marks a memory label with path or separator tricks.
	ErrBadLabel = errors.New("handlers: invalid memory label")
)

// ContractViolation is returned by write_memory when data does not match
// the step's return_spec; nothing is written.
type ContractViolation struct {
	Expected json.RawMessage `json:"expected"`
	Actual   json.RawMessage `json:"actual"`
	Reason   string          `json:"reason"`
}

func (c *ContractViolation) Error() string { return "handlers: contract violation: " + c.Reason }

// Memory scopes (seed 000 §4): a step output belongs to its session; a
// user's past exchanges and facts to the user, across sessions; a
// tenant's facts to every user of the tenant.
const (
	ScopeSession = store.ScopeSession
	ScopeUser    = store.ScopeUser
	ScopeTenant  = store.ScopeTenant
)

// Embed embeds text with e, or returns nil when e is nil.
func Embed(ctx context.Context, e store.Embedder, text string) ([]float32, error) {
	if e == nil {
		return nil, nil
	}
	vecs, err := e.Embed(ctx, []string{text})
	if err != nil {
		return nil, fmt.Errorf("handlers: embed memory: %w", err)
	}
	return vecs[0], nil
}

var LabelRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_]{0,63}$`)

// MemoryScope is the namespace of a write: the infra tool builds the key
// {tenant}:{session}:{task}:{label} from it, never the caller.
type MemoryScope struct {
	TenantID, SessionID, TaskID, UserID, PlanID string
	StepIndex                                   int
	// Shared says another live member of the step's group may write in
	// the same scope (a group of several): only then is the key locked.
	// A step dispatched alone is its key's only writer (its task id is
	// the run's and the step's), so its write takes no lock.
	Shared bool
}

// Key returns the namespaced memory key of label.
func (s MemoryScope) Key(label string) string {
	return strings.Join([]string{s.TenantID, s.SessionID, s.TaskID, label}, ":")
}

// MemoryWriter is write_memory, the single choke point for step outputs:
// it validates the label and the data against the return_spec, locks the
// namespaced key and writes. The lock stays held until the router has
// taken the step's result into the plan (ReleaseMemoryLocks, seed 000
// §4.2); the bucket's TTL frees the locks of a run that died before.
type MemoryWriter struct {
	Store    MemoryStore
	Locks    jetstream.KeyValue // nil disables locking (single-writer tests)
	LockWait time.Duration      // default 5s
	Now      func() time.Time
	// Embedder embeds every value written, for the semantic memory
	// query; nil writes no embedding.
	Embedder store.Embedder
	// Retention sets each write's ttl_at (session scope); zero keeps
	// step outputs for ever.
	Retention store.MemoryRetention
}

// Write stores data under scope.Key(label) after checking it against
// shape. It returns the key and how long it waited for the lock.
func (w *MemoryWriter) Write(ctx context.Context, scope MemoryScope, label string, data, shape json.RawMessage) (string, time.Duration, error) {
	return w.WriteDrawn(ctx, scope, label, data, shape, nil)
}

// WriteDrawn is Write drawing the write from a budget first: draw runs
// while the key's lock is taken (two round trips at once), and nothing is
// written unless it succeeds. A draw that fails returns its error, after
// the lock this call took, if any, is released (a lock the owner already
// held stays); it runs, and wins, even when the label or the data is
// invalid, as a draw made before Write would. A nil draw draws nothing.
// A failed release leaves the lock to the bucket's TTL and is joined to
// draw's error.
func (w *MemoryWriter) WriteDrawn(ctx context.Context, scope MemoryScope, label string, data, shape json.RawMessage,
	draw func(context.Context) error) (string, time.Duration, error) {
	doc, waited, err := w.drawn(ctx, scope, label, data, shape, draw)
	if err != nil {
		return "", waited, err
	}
	if _, err := w.Store.PutMemory(ctx, doc); err != nil {
		return "", waited, fmt.Errorf("handlers: write memory: %w", err)
	}
	return doc.Key, waited, nil
}

// StartDrawn is WriteDrawn for a value no reader needs from memory before
// wait returns: it checks the label and the data, draws and embeds as
// WriteDrawn does, then starts the write and returns without awaiting it;
// wait returns the write's outcome. An executor whose step's output rides
// in the run state (orch.Plan.CarriesAlone) writes it so, and the worker
// awaits the write while the step's result is published, before the input
// is acknowledged (events.Defer): the write leaves the hop's critical path
// and stays durable before the hop ends. A key another live task may
// write (scope.Shared) is locked and written before StartDrawn returns.
func (w *MemoryWriter) StartDrawn(ctx context.Context, scope MemoryScope, label string, data, shape json.RawMessage,
	draw func(context.Context) error) (key string, wait func(context.Context) error, err error) {
	if scope.Shared {
		key, _, err := w.WriteDrawn(ctx, scope, label, data, shape, draw)
		return key, func(context.Context) error { return nil }, err
	}
	doc, _, err := w.drawn(ctx, scope, label, data, shape, draw)
	if err != nil {
		return "", nil, err
	}
	// The write outlives the handler's context, which ends when the
	// handler returns; the store's own timeout bounds it.
	put := context.WithoutCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := w.Store.PutMemory(put, doc)
		done <- err
	}()
	return doc.Key, func(ctx context.Context) error {
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("handlers: write memory: %w", err)
			}
			return nil
		case <-ctx.Done():
			return fmt.Errorf("handlers: write memory %s: %w", doc.Key, ctx.Err())
		}
	}, nil
}

// drawn checks data against the label and shape, draws, locks a shared
// key and embeds data: the document WriteDrawn and StartDrawn write.
func (w *MemoryWriter) drawn(ctx context.Context, scope MemoryScope, label string, data, shape json.RawMessage,
	draw func(context.Context) error) (store.Memory, time.Duration, error) {
	var invalid error
	if !LabelRE.MatchString(label) {
		invalid = fmt.Errorf("%w: %q (want [a-z0-9_], at most 64)", ErrBadLabel, label)
	} else if err := schema.Validate(shape, data); err != nil {
		invalid = &ContractViolation{Expected: shape, Actual: shapeOf(data), Reason: err.Error()}
	}
	if invalid != nil {
		if draw != nil {
			if err := draw(ctx); err != nil {
				return store.Memory{}, 0, err
			}
		}
		return store.Memory{}, 0, invalid
	}
	key := scope.Key(label)
	lockDrawn := w.lockDrawn
	if !scope.Shared {
		lockDrawn = drawUnlocked
	}
	waited, took, err := lockDrawn(ctx, key, scope.TaskID, draw)
	if err != nil {
		return store.Memory{}, waited, err
	}
	// Embedded once drawn and locked: a refused draw embeds nothing. A
	// failed embedding writes nothing and leaves no lock it took.
	vec, err := Embed(ctx, w.Embedder, string(data))
	if err != nil {
		if rerr := w.release(ctx, key, took); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return store.Memory{}, waited, err
	}
	now := w.now()
	return store.Memory{
		ID: key, TenantID: scope.TenantID, SessionID: scope.SessionID, TaskID: scope.TaskID, UserID: scope.UserID,
		Scope: ScopeSession, Key: key, Text: string(data), Embedding: vec, Source: "executor", StepIndex: scope.StepIndex,
		PlanID: scope.PlanID, CreatedAt: now, TTLAt: w.Retention.TTLAt(ScopeSession, now),
	}, waited, nil
}

// lockDrawn takes the key's lock for owner while draw, if set, runs;
// took reports that this call created the lock. When draw fails, the
// Lock it took is released.
func (w *MemoryWriter) lockDrawn(ctx context.Context, key, owner string, draw func(context.Context) error) (time.Duration, bool, error) {
	if draw == nil {
		return w.Lock(ctx, key, owner)
	}
	type locked struct {
		waited time.Duration
		took   bool
		err    error
	}
	lk := make(chan locked, 1)
	go func() {
		waited, took, err := w.Lock(ctx, key, owner)
		lk <- locked{waited, took, err}
	}()
	derr := draw(ctx)
	l := <-lk
	if derr != nil {
		if rerr := w.release(ctx, key, l.took); rerr != nil {
			derr = errors.Join(derr, rerr)
		}
		return l.waited, false, derr
	}
	return l.waited, l.took, l.err
}

// drawUnlocked is lockDrawn for a key no other live task writes: it
// draws and takes no lock.
func drawUnlocked(ctx context.Context, _, _ string, draw func(context.Context) error) (time.Duration, bool, error) {
	if draw == nil {
		return 0, false, nil
	}
	return 0, false, draw(ctx)
}

// release deletes the lock of key when took (this write created it); a
// failed delete leaves it to the bucket's TTL.
func (w *MemoryWriter) release(ctx context.Context, key string, took bool) error {
	if !took {
		return nil
	}
	if err := w.Locks.Delete(context.WithoutCancel(ctx), kvs.Key(key)); err != nil {
		return fmt.Errorf("handlers: release lock %s: %w", key, err)
	}
	return nil
}

func (w *MemoryWriter) now() time.Time {
	if w.Now != nil {
		return w.Now().UTC()
	}
	return time.Now().UTC()
}

// Lock takes the key in the locks bucket for owner. The same owner may
// take it again (a redelivered step); another owner waits up to LockWait.
// took reports that this call created the lock (the owner did not hold
// it already).
func (w *MemoryWriter) Lock(ctx context.Context, key, owner string) (waited time.Duration, took bool, err error) {
	if w.Locks == nil {
		return 0, false, nil
	}
	wait := w.LockWait
	if wait <= 0 {
		wait = 5 * time.Second
	}
	lk := kvs.Key(key)
	start := time.Now()
	for {
		_, err := w.Locks.Create(ctx, lk, []byte(owner))
		if err == nil {
			return time.Since(start), true, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return time.Since(start), false, fmt.Errorf("handlers: lock %s: %w", key, err)
		}
		if e, gerr := w.Locks.Get(ctx, lk); gerr == nil && string(e.Value()) == owner {
			return time.Since(start), false, nil
		}
		if time.Since(start) >= wait {
			return time.Since(start), false, fmt.Errorf("%w: %s after %s", ErrMemoryLock, key, wait)
		}
		select {
		case <-ctx.Done():
			return time.Since(start), false, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ReleaseMemoryLocks frees the memory locks of the steps of a group whose
// results the router has taken into the plan: the value under each key
// has been confirmed, so another task may write it. Only the members of
// a group of several lock their keys (MemoryScope.Shared). The deletes
// are not awaited: a lost one only leaves the lock to the bucket's TTL.
func ReleaseMemoryLocks(ctx context.Context, locks jetstream.KeyValue, g orch.Group, results []orch.StepResult) {
	if locks == nil || g.Expected <= 1 {
		return
	}
	for _, r := range results {
		if r.MemoryKey == "" {
			continue
		}
		go func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = locks.Delete(rctx, kvs.Key(r.MemoryKey))
		}()
	}
}

// shapeOf describes the JSON type of every top-level field of data, for a
// contract_violation report.
func shapeOf(data []byte) json.RawMessage {
	var v any
	if json.Unmarshal(data, &v) != nil {
		return json.RawMessage(`"not JSON"`)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		b, _ := json.Marshal(typeName(v))
		return b
	}
	shape := map[string]string{}
	for k, f := range obj {
		shape[k] = typeName(f)
	}
	b, _ := json.Marshal(shape)
	return b
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	default:
		return "object"
	}
}

// memoryReader reads step outputs.
type memoryReader interface {
	GetMemory(ctx context.Context, key string) (store.Memory, error)
}

// ReadMemories reads the step outputs of keys at once (one round trip's
// wait, not one per key), in the order of keys; the first failure, in
// that order, is the error.
func ReadMemories(ctx context.Context, st memoryReader, keys []string) ([]store.Memory, error) {
	out := make([]store.Memory, len(keys))
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i, key := range keys {
		wg.Go(func() {
			if out[i], errs[i] = st.GetMemory(ctx, key); errs[i] != nil {
				errs[i] = fmt.Errorf("handlers: read memory %s: %w", key, errs[i])
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// MemoryStore reads and writes step outputs.
type MemoryStore interface {
	PutMemory(ctx context.Context, m store.Memory) (store.Memory, error)
	GetMemory(ctx context.Context, key string) (store.Memory, error)
}
