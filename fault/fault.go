package fault

import (
	"context"
	"errors"
)

// ErrPermanent matches every error marked Permanent under errors.Is.
var ErrPermanent = errors.New("fault: permanent")

// permanent marks an error that retrying cannot fix; its message is the
// error's own.
type permanent struct{ err error }

func (e permanent) Error() string        { return e.err.Error() }
func (e permanent) Unwrap() error        { return e.err }
func (e permanent) Is(target error) bool { return target == ErrPermanent }

// Permanent marks err as permanent: handling the same input again fails
// the same way. The message is err's, and errors.Is and errors.As see
// through the mark. A sentinel may be declared marked:
//
//	var ErrNotDerivable = fault.Permanent(errors.New("schema: shape not derivable"))
//
// Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

// IsPermanent reports whether err, or an error it wraps, was marked
// Permanent, and err does not say that the hop's context ended: a
// cancelled or timed-out hop is transient whatever else it says.
// Every other error, nil and unclassified ones included, is not
// permanent: it is retried.
func IsPermanent(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return errors.Is(err, ErrPermanent)
}
