package handlers_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/events/eventstest"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/skills"
)

// TestAttachmentsStoreOncePerTenant: the same content put twice for a
// tenant is one object, named by the tenant and the content's hash, read
// back whole with its MIME type; another tenant's copy is an object of its
// own.
func TestAttachmentsStoreOncePerTenant(t *testing.T) {
	_, _, js := eventstest.Bootstrap(t, handlerstest.Topology())
	ctx := handlerstest.Ctx(t)
	store, err := handlers.NewAttachments(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("%PDF-1.7 quarterly report\n"), 20000) // several chunks
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	att := skills.Attachment{Kind: "resource", MimeType: "application/pdf", URI: "file:///reports/q3.pdf"}

	obs, err := js.ObjectStore(ctx, handlers.BucketArtifacts)
	if err != nil {
		t.Fatal(err)
	}
	var nuid string
	for i := range 2 {
		ref, err := store.Put(ctx, handlerstest.Tenant, att, data)
		if err != nil {
			t.Fatalf("Put #%d: %v", i+1, err)
		}
		if want := "artifact://" + handlerstest.Tenant + "/" + digest; ref != want {
			t.Fatalf("Put #%d ref = %q, want %q", i+1, ref, want)
		}
		info, err := obs.GetInfo(ctx, handlerstest.Tenant+"/"+digest)
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 && info.NUID != nuid {
			t.Fatal("the second Put of the same content stored it again")
		}
		nuid = info.NUID
	}
	if names := objectNames(t, obs); !slices.Equal(names, []string{handlerstest.Tenant + "/" + digest}) {
		t.Fatalf("objects = %v, want one", names)
	}
	res, err := obs.Get(ctx, handlerstest.Tenant+"/"+digest)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	var got bytes.Buffer
	if _, err := got.ReadFrom(res); err != nil {
		t.Fatal(err)
	}
	info, _ := res.Info()
	if !bytes.Equal(got.Bytes(), data) || info.Headers.Get("Content-Type") != "application/pdf" ||
		info.Metadata["kind"] != "resource" || info.Metadata["uri"] != att.URI {
		t.Fatalf("object: %d bytes (want %d), headers %v, metadata %v", got.Len(), len(data), info.Headers, info.Metadata)
	}

	ref, err := store.Put(ctx, "gamma", att, data)
	if err != nil || ref != "artifact://gamma/"+digest {
		t.Fatalf("gamma's Put = %q, %v", ref, err)
	}
	if names := objectNames(t, obs); !slices.Equal(names, []string{handlerstest.Tenant + "/" + digest, "gamma/" + digest}) {
		t.Fatalf("objects = %v, want one per tenant", names)
	}
	if _, err := store.Put(ctx, "../beta", att, data); !errors.Is(err, skills.ErrInvalidTenant) {
		t.Fatalf("Put for tenant ../beta err = %v, want ErrInvalidTenant", err)
	}
}

// TestAttachmentsRefreshAgeingObject: content stored more than half the
// bucket's TTL ago is stored again, so that its new reference does not
// expire with the first.
func TestAttachmentsRefreshAgeingObject(t *testing.T) {
	topo := handlerstest.Topology()
	topo.ObjectStores = []events.ObjectStore{{Name: handlers.BucketArtifacts, TTL: 2 * time.Second}}
	_, _, js := eventstest.Bootstrap(t, topo)
	ctx := handlerstest.Ctx(t)
	store, err := handlers.NewAttachments(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	obs, err := js.ObjectStore(ctx, handlers.BucketArtifacts)
	if err != nil {
		t.Fatal(err)
	}
	att, data := skills.Attachment{Kind: "image", MimeType: "image/png"}, []byte("\x89PNG\r\n\x1a\nchart")
	nuids := map[string]bool{}
	for _, age := range []time.Duration{0, 1200 * time.Millisecond} {
		handlers.SetAttachmentsClock(store, func() time.Time { return time.Now().Add(age) })
		ref, err := store.Put(ctx, handlerstest.Tenant, att, data)
		if err != nil {
			t.Fatal(err)
		}
		info, err := obs.GetInfo(ctx, ref[len(handlers.ArtifactScheme):])
		if err != nil {
			t.Fatal(err)
		}
		nuids[info.NUID] = true
	}
	if len(nuids) != 2 || len(objectNames(t, obs)) != 1 {
		t.Fatalf("%d stores of the ageing object, %d objects; want 2 and 1", len(nuids), len(objectNames(t, obs)))
	}
}

// objectNames are the names of the objects of obs, sorted.
func objectNames(t *testing.T, obs jetstream.ObjectStore) []string {
	t.Helper()
	infos, err := obs.List(handlerstest.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, info := range infos {
		names = append(names, info.Name)
	}
	slices.Sort(names)
	return names
}

// deadlineObs is a real object store that records the deadline each Put
// and Get was given, and the Get's context.
type deadlineObs struct {
	jetstream.ObjectStore
	put, get time.Time
	getCtx   context.Context
}

func (d *deadlineObs) Put(ctx context.Context, meta jetstream.ObjectMeta, r io.Reader) (*jetstream.ObjectInfo, error) {
	d.put, _ = ctx.Deadline()
	return d.ObjectStore.Put(ctx, meta, r)
}

func (d *deadlineObs) Get(ctx context.Context, name string, opts ...jetstream.GetObjectOpt) (jetstream.ObjectResult, error) {
	d.get, _ = ctx.Deadline()
	d.getCtx = ctx
	return d.ObjectStore.Get(ctx, name, opts...)
}

// TestAttachmentsTransfersAreBounded: storing an attachment waits for its
// acks no longer than one call plus its size at 1 MiB/s, however long
// the caller's context lives (an ack lost with a dying node must not
// hold the step until the handler's deadline); reading one is given its
// size at a slow reader's pace, not nats.go's 5 s default, and its
// context ends when it is closed.
func TestAttachmentsTransfersAreBounded(t *testing.T) {
	_, _, js := eventstest.Bootstrap(t, handlerstest.Topology())
	ctx := handlerstest.Ctx(t)
	store, err := handlers.NewAttachments(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	var obs *deadlineObs
	handlers.WrapObjectStore(store, func(inner jetstream.ObjectStore) jetstream.ObjectStore {
		obs = &deadlineObs{ObjectStore: inner}
		return obs
	})
	data := bytes.Repeat([]byte("chart "), 1<<20) // 6 MiB
	start := time.Now()
	ref, err := store.Put(context.Background(), handlerstest.Tenant, skills.Attachment{Kind: "image", MimeType: "image/png"}, data)
	if err != nil {
		t.Fatal(err)
	}
	// The deadline was set between start and now.
	if want := events.CallTimeout + 6*time.Second; obs.put.IsZero() || obs.put.Before(start.Add(want)) || obs.put.After(time.Now().Add(want)) {
		t.Fatalf("Put's deadline %v after its start, want %s after the bound was set", obs.put.Sub(start), want)
	}

	start = time.Now()
	res, typ, err := store.Open(context.Background(), handlerstest.Tenant, ref[strings.LastIndex(ref, "/")+1:])
	if err != nil {
		t.Fatal(err)
	}
	opened := time.Now()
	got, err := io.ReadAll(res)
	if err != nil || !bytes.Equal(got, data) || typ != "image/png" {
		t.Fatalf("read %d of %d bytes as %s: %v", len(got), len(data), typ, err)
	}
	if want := events.CallTimeout + 96*time.Second; obs.get.IsZero() || obs.get.Before(start.Add(want)) || obs.get.After(opened.Add(want)) {
		t.Fatalf("Get's deadline %v after its start, want %s after the bound was set", obs.get.Sub(start), want)
	}
	if obs.getCtx.Err() != nil {
		t.Fatal("the read's context ended before it was closed")
	}
	if err := res.Close(); err != nil || obs.getCtx.Err() == nil {
		t.Fatalf("Close: %v; the read's context is %v", err, obs.getCtx.Err())
	}
}
