package events

import "errors"

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

// permanentError marks an error that retrying cannot fix.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks err as permanent: the runtime does not redeliver the
// message but dead-letters it with err as the reason and terminates it.
// Errors not marked permanent are transient and the message is redelivered
// with backoff.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err, or any error it wraps, was marked Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}
