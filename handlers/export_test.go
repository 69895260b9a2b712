package handlers

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// WrapObjectStore puts wrap around the object store a keeps its
// attachments in, for the external tests.
func WrapObjectStore(a *Attachments, wrap func(jetstream.ObjectStore) jetstream.ObjectStore) {
	a.obs = wrap(a.obs)
}

// SetAttachmentsClock makes a read the time from now.
func SetAttachmentsClock(a *Attachments, now func() time.Time) {
	a.now = now
}
