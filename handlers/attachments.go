package handlers

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/skills"
)

// BucketArtifacts is the object store of the skill results' attachments
// (see Attachments), kept as long as the runs' events.
const BucketArtifacts = "artifacts"

// ObjectStores are the object stores the roles use.
var ObjectStores = []events.ObjectStore{{Name: BucketArtifacts, TTL: events.KeepWithRuns}}

// ArtifactScheme starts the reference of an attachment in BucketArtifacts:
// artifact://<tenant>/<sha256>.
const ArtifactScheme = "artifact://"

// Attachments is the skills.AttachmentStore of the executor: it keeps
// each attachment's data in BucketArtifacts, named <tenant>/<sha256 of
// the data>, so that the same content is stored once per tenant, with the
// attachment's MIME type as the object's Content-Type header.
type Attachments struct {
	obs jetstream.ObjectStore
	ttl time.Duration    // the bucket's
	now func() time.Time // time.Now; tests move it on
}

var _ skills.AttachmentStore = (*Attachments)(nil)

// NewAttachments opens BucketArtifacts.
func NewAttachments(ctx context.Context, js jetstream.JetStream) (*Attachments, error) {
	obs, err := js.ObjectStore(ctx, BucketArtifacts)
	if err != nil {
		return nil, fmt.Errorf("handlers: object store %s: %w", BucketArtifacts, err)
	}
	st, err := obs.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("handlers: object store %s: %w", BucketArtifacts, err)
	}
	return &Attachments{obs: obs, ttl: st.TTL(), now: time.Now}, nil
}

// Put stores data for tenant unless it already is, and returns its
// reference, artifact://<tenant>/<sha256>. An object stored more than half
// the bucket's TTL ago is stored again, so that a new reference to it
// outlives the run that holds it.
func (s *Attachments) Put(ctx context.Context, tenant string, a skills.Attachment, data []byte) (string, error) {
	if !skills.ValidTenant(tenant) {
		return "", fmt.Errorf("handlers: attachment: %w", skills.ErrInvalidTenant)
	}
	sum := sha256.Sum256(data)
	name := tenant + "/" + hex.EncodeToString(sum[:])
	ictx, cancel := context.WithTimeout(ctx, events.CallTimeout) // one request: its reply may be lost with a dying node
	info, err := s.obs.GetInfo(ictx, name)
	cancel()
	switch {
	case err == nil && (s.ttl == 0 || s.now().Sub(info.ModTime) < s.ttl/2):
		return ArtifactScheme + name, nil
	case err != nil && !errors.Is(err, jetstream.ErrObjectNotFound):
		return "", fmt.Errorf("handlers: artifact %s: %w", name, err)
	}
	meta := jetstream.ObjectMeta{Name: name,
		Headers:  nats.Header{"Content-Type": []string{cmp.Or(a.MimeType, "application/octet-stream")}},
		Metadata: map[string]string{"kind": a.Kind, "uri": a.URI}}
	// The chunks are published at once and their acks awaited at the
	// end, until the context's deadline: bound that wait, or an ack lost
	// with a dying node holds the step until the handler's deadline.
	pctx, cancel := context.WithTimeout(ctx, transferBound(len(data), putMinRate))
	defer cancel()
	if _, err := s.obs.Put(pctx, meta, bytes.NewReader(data)); err != nil {
		return "", fmt.Errorf("handlers: store artifact %s: %w", name, err)
	}
	return ArtifactScheme + name, nil
}

// Open returns tenant's artifact whose data hashes to digest (lowercase
// hex SHA-256), to read and close, and its Content-Type. An artifact the
// tenant does not have wraps jetstream.ErrObjectNotFound, whoever else
// has the same content.
func (s *Attachments) Open(ctx context.Context, tenant, digest string) (jetstream.ObjectResult, string, error) {
	if !skills.ValidTenant(tenant) || !isDigest(digest) {
		return nil, "", fmt.Errorf("handlers: artifact %s/%s: %w", tenant, digest, jetstream.ErrObjectNotFound)
	}
	name := tenant + "/" + digest
	ictx, cancel := context.WithTimeout(ctx, events.CallTimeout)
	info, err := s.obs.GetInfo(ictx, name)
	cancel()
	if err != nil {
		return nil, "", fmt.Errorf("handlers: artifact %s: %w", name, err)
	}
	// The whole read is bounded by its context's deadline (without one,
	// nats.go's default of 5 s, which would cut a slow reader's download
	// of a large object): allow the object's size at a slow reader's
	// pace, so a chunk lost with a dying node still ends the read.
	rctx, cancel := context.WithTimeout(ctx, transferBound(int(info.Size), readMinRate))
	res, err := s.obs.Get(rctx, name)
	if err != nil {
		cancel()
		return nil, "", fmt.Errorf("handlers: artifact %s: %w", name, err)
	}
	return boundResult{res, cancel}, cmp.Or(info.Headers.Get("Content-Type"), "application/octet-stream"), nil
}

// The slowest transfers an attachment is given time for: storing it
// (between a role and NATS) and reading it (to an HTTP client).
const (
	putMinRate  = 1 << 20  // bytes a second
	readMinRate = 64 << 10 // bytes a second
)

// transferBound is the time n bytes may take at rate bytes a second,
// plus one call's.
func transferBound(n, rate int) time.Duration {
	return events.CallTimeout + time.Duration(n)*time.Second/time.Duration(rate)
}

// boundResult is an object being read whose context ends when it is
// closed.
type boundResult struct {
	jetstream.ObjectResult
	cancel context.CancelFunc
}

func (r boundResult) Close() error {
	defer r.cancel()
	return r.ObjectResult.Close()
}

// isDigest reports whether s is a lowercase hex SHA-256.
func isDigest(s string) bool {
	if len(s) != sha256.Size*2 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
