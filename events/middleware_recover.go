package events

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/cloudevents/sdk-go/v2/event"
)

// Recover turns a panic in a handler into a permanent error, so the message
// is dead-lettered with the panic as its reason instead of crashing the
// process on every redelivery.
func Recover() Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, ev event.Event) (outs []event.Event, err error) {
			defer func() {
				if r := recover(); r != nil {
					outs = nil
					err = Permanent(fmt.Errorf("events: handler panic: %v\n%s", r, debug.Stack()))
				}
			}()
			return next(ctx, ev)
		}
	}
}
