package handlerstest

import (
	"sync/atomic"
	"time"
)

// Clock is a clock a test moves.
type Clock struct{ at atomic.Int64 }

// NewClock is a Clock at t.
func NewClock(t time.Time) *Clock {
	c := &Clock{}
	c.Set(t)
	return c
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) { c.at.Store(t.UnixNano()) }

// Now is the clock's time.
func (c *Clock) Now() time.Time { return time.Unix(0, c.at.Load()).UTC() }

// Add moves the clock on by d.
func (c *Clock) Add(d time.Duration) { c.Set(c.Now().Add(d)) }
