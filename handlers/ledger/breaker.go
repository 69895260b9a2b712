package ledger

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentbus/agentbus/handlers/internal/kvs"
)

// BucketCircuits holds the circuits that opened or closed in any
// executor, by skill (see Breakers.Shared). An entry unchanged for an hour
// is long past any cooldown.
const BucketCircuits = "circuits"

// Breakers are per-skill circuit breakers (seed 003): after Failures
// consecutive failed calls of a skill its circuit opens and its calls
// fail fast for Cooldown; then one trial call goes through (half-open):
// its success closes the circuit, its failure opens it again. A nil
// Breakers lets every call through.
//
// With Shared set, the executors share their circuits' states: a circuit
// that opens or closes in one process is written to the bucket (Publish),
// and every process that follows it (Follow) takes that state. A skill
// one executor finds failing is refused by all of them for the cooldown,
// instead of each process spending its own run of failed calls on it;
// one trial that succeeds anywhere closes it everywhere. The count of
// consecutive failures stays each process's own.
type Breakers struct {
	// Failures opens a circuit; default 5.
	Failures int
	// Cooldown is how long an open circuit refuses calls; default 30 s.
	Cooldown time.Duration
	Now      func() time.Time
	// Shared is the circuits bucket (BucketCircuits); nil keeps every
	// circuit to its process.
	Shared jetstream.KeyValue
	Log    zerolog.Logger

	mu sync.Mutex
	m  map[string]*circuit
}

// sharedCircuit is a circuit's state as one process wrote it.
type sharedCircuit struct {
	Key      string `json:"key"`
	State    string `json:"state"` // open or closed
	At       int64  `json:"at"`    // when it opened or closed, unix ms
	Failures int    `json:"failures,omitempty"`
}

// sharedKey is key's entry in the bucket: skill names may hold characters
// a KV key may not.
func sharedKey(key string) string { return base64.RawURLEncoding.EncodeToString([]byte(key)) }

// Publish writes key's circuit state to the shared bucket after a change
// (Done's answer), so that every executor takes it. A write that fails is
// logged: the circuit still holds in this process.
func (b *Breakers) Publish(ctx context.Context, key, state string) {
	if b == nil || b.Shared == nil || state == CircuitHalfOpen || state == "" {
		return
	}
	b.mu.Lock()
	c := b.circuit(key)
	e := sharedCircuit{Key: key, State: state, At: b.now().UnixMilli(), Failures: c.failures}
	if state == CircuitOpen {
		e.At = c.openedAt.UnixMilli()
	} else {
		c.closedAt = time.UnixMilli(e.At)
	}
	b.mu.Unlock()
	data, err := json.Marshal(e)
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = b.Shared.Put(ctx, sharedKey(key), data)
		cancel()
	}
	if err != nil {
		b.Log.Warn().Err(err).Str("circuit", key).Str("state", state).Msg("circuit state not shared")
	}
}

// Follow takes the states other executors share until ctx ends; it
// returns once the states shared so far are taken.
func (b *Breakers) Follow(ctx context.Context) error {
	if b == nil || b.Shared == nil {
		return nil
	}
	w, err := b.Shared.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("handlers: watch %s: %w", BucketCircuits, err)
	}
	return kvs.Follow(ctx, w, func(e jetstream.KeyValueEntry) {
		var sc sharedCircuit
		if e.Operation() == jetstream.KeyValuePut && json.Unmarshal(e.Value(), &sc) == nil && sharedKey(sc.Key) == e.Key() {
			b.adopt(sc)
		}
	})
}

// adopt takes a shared state newer than what this process knows of the
// circuit: an opening opens it from the time it opened (a trial in
// flight here keeps its result to report), a closing closes it.
func (b *Breakers) adopt(sc sharedCircuit) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.circuit(sc.Key)
	at := time.UnixMilli(sc.At)
	switch sc.State {
	case CircuitOpen:
		if !at.After(c.openedAt) || !at.After(c.closedAt) { // old news
			return
		}
		c.state, c.openedAt, c.failures = CircuitOpen, at, max(c.failures, sc.Failures)
	case CircuitClosed:
		if !at.After(c.openedAt) || !at.After(c.closedAt) {
			return
		}
		c.state, c.failures, c.closedAt = CircuitClosed, 0, at
	}
}

// Circuit states.
const (
	CircuitClosed   = "closed"
	CircuitOpen     = "open"
	CircuitHalfOpen = "half_open"
)

type circuit struct {
	state    string
	failures int
	openedAt time.Time
	closedAt time.Time // by a trial, here or in another executor
	probing  bool      // half-open: the trial call is in flight
}

// ErrCircuitOpen is what a call through an open circuit gets.
var ErrCircuitOpen = errors.New("handlers: circuit open")

// CircuitOpenError is a refused call: the skill's circuit is open until Until.
type CircuitOpenError struct {
	Key      string
	Failures int
	Until    time.Time
}

func (e *CircuitOpenError) Error() string {
	return fmt.Sprintf("circuit open: %s failed %d times in a row; calls fail fast until %s", e.Key, e.Failures,
		e.Until.UTC().Format(time.RFC3339))
}

// Unwrap makes a CircuitOpenError match ErrCircuitOpen.
func (e *CircuitOpenError) Unwrap() error { return ErrCircuitOpen }

// Allow reports whether a call of key may be made now. A half-open
// circuit lets one trial call through at a time; its result (Done)
// decides the circuit.
func (b *Breakers) Allow(key string) error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.circuit(key)
	switch c.state {
	case CircuitOpen:
		until := c.openedAt.Add(b.cooldown())
		if b.now().Before(until) {
			return &CircuitOpenError{Key: key, Failures: c.failures, Until: until}
		}
		c.state, c.probing = CircuitHalfOpen, true
	case CircuitHalfOpen:
		if c.probing {
			return &CircuitOpenError{Key: key, Failures: c.failures, Until: b.now()}
		}
		c.probing = true
	}
	return nil
}

// Done records the result of an allowed call and returns the circuit's
// new state when the call changed it ("" otherwise).
func (b *Breakers) Done(key string, ok bool) string {
	if b == nil {
		return ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.circuit(key)
	was := c.state
	c.probing = false
	switch {
	case ok:
		c.state, c.failures = CircuitClosed, 0
		if was != CircuitClosed {
			c.closedAt = b.now()
		}
	case was == CircuitHalfOpen:
		c.state, c.openedAt = CircuitOpen, b.now()
		c.failures++
	default:
		c.failures++
		if c.failures >= b.threshold() {
			c.state, c.openedAt = CircuitOpen, b.now()
		}
	}
	if c.state == was {
		return ""
	}
	return c.state
}

// Skip ends an allowed call that never reached the skill (refused by the
// run's budget, or failed before it was made): the circuit keeps its
// state and count, and a half-open circuit's trial is not spent.
func (b *Breakers) Skip(key string) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.circuit(key).probing = false
}

// State is key's circuit state.
func (b *Breakers) State(key string) string {
	if b == nil {
		return CircuitClosed
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.circuit(key).state
}

func (b *Breakers) circuit(key string) *circuit {
	if b.m == nil {
		b.m = map[string]*circuit{}
	}
	c, ok := b.m[key]
	if !ok {
		c = &circuit{state: CircuitClosed}
		b.m[key] = c
	}
	return c
}

func (b *Breakers) threshold() int {
	if b.Failures > 0 {
		return b.Failures
	}
	return 5
}

func (b *Breakers) cooldown() time.Duration {
	if b.Cooldown > 0 {
		return b.Cooldown
	}
	return 30 * time.Second
}

func (b *Breakers) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}
