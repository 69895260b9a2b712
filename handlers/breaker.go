package handlers

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Breakers are per-skill circuit breakers (seed 003): after Failures
// consecutive failed calls of a skill its circuit opens and its calls
// fail fast for Cooldown; then one trial call goes through (half-open):
// its success closes the circuit, its failure opens it again. A nil
// Breakers lets every call through.
type Breakers struct {
	// Failures opens a circuit; default 5.
	Failures int
	// Cooldown is how long an open circuit refuses calls; default 30 s.
	Cooldown time.Duration
	Now      func() time.Time

	mu sync.Mutex
	m  map[string]*circuit
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
	probing  bool // half-open: the trial call is in flight
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
