package events

import (
	"errors"

	"github.com/agentbus/agentbus/fault"
)

// Sentinel errors of the events package.
var (
	// ErrInvalidToken marks a tenant or session id that cannot be a subject token.
	ErrInvalidToken = errors.New("events: invalid subject token")
	// ErrUnknownType marks an event type agentbus does not route.
	ErrUnknownType = errors.New("events: unknown event type")
	// ErrDecode marks a message that is not a valid agentbus CloudEvent.
	ErrDecode = errors.New("events: cannot decode event")
	// ErrPublish marks an output that JetStream did not acknowledge.
	ErrPublish = errors.New("events: publish not acknowledged")
)

// Permanent marks err as permanent (fault.Permanent): the runtime does
// not redeliver the message but dead-letters it with err as the reason and
// terminates it. An error any package marked with fault.Permanent is
// handled the same way; every other error is transient and the message is
// redelivered with backoff.
func Permanent(err error) error { return fault.Permanent(err) }

// IsPermanent reports whether err is permanent (fault.IsPermanent).
func IsPermanent(err error) bool { return fault.IsPermanent(err) }
