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
	ttl time.Duration // the bucket's
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
	return &Attachments{obs: obs, ttl: st.TTL()}, nil
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
	case err == nil && (s.ttl == 0 || time.Since(info.ModTime) < s.ttl/2):
		return ArtifactScheme + name, nil
	case err != nil && !errors.Is(err, jetstream.ErrObjectNotFound):
		return "", fmt.Errorf("handlers: artifact %s: %w", name, err)
	}
	meta := jetstream.ObjectMeta{Name: name,
		Headers:  nats.Header{"Content-Type": []string{cmp.Or(a.MimeType, "application/octet-stream")}},
		Metadata: map[string]string{"kind": a.Kind, "uri": a.URI}}
	if _, err := s.obs.Put(ctx, meta, bytes.NewReader(data)); err != nil {
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
	res, err := s.obs.Get(ctx, tenant+"/"+digest)
	if err != nil {
		return nil, "", fmt.Errorf("handlers: artifact %s/%s: %w", tenant, digest, err)
	}
	info, err := res.Info()
	if err != nil {
		_ = res.Close()
		return nil, "", fmt.Errorf("handlers: artifact %s/%s: %w", tenant, digest, err)
	}
	return res, cmp.Or(info.Headers.Get("Content-Type"), "application/octet-stream"), nil
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
