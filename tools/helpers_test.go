package tools_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events/eventstest"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/store/embedded"
	"github.com/agentbus/agentbus/tools"
)

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// env is a real in-process NATS JetStream with the agentbus topology and
// the embedded store on it.
type env struct {
	js      jetstream.JetStream
	st      *embedded.Store
	secrets *tools.Secrets
}

func newEnv(t *testing.T) *env {
	t.Helper()
	topo := eventstest.TestTopology()
	topo.Buckets, topo.ObjectStores = handlers.Buckets, handlers.ObjectStores
	_, _, js := eventstest.Bootstrap(t, topo)
	ctx := testCtx(t)
	st, err := embedded.New(ctx, js, embedded.Config{})
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, handlers.BucketToolSecrets)
	if err != nil {
		t.Fatal(err)
	}
	key := make([]byte, tools.KeyLen)
	_, _ = rand.Read(key)
	secrets, err := tools.NewSecrets(kv, key)
	if err != nil {
		t.Fatal(err)
	}
	return &env{js: js, st: st, secrets: secrets}
}
