package runctl

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/handlers/internal/kvs"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills"
)

// Credentials keeps the API key a caller sent with a run, by run id, in
// the credentials bucket. The key reaches the skill calls of that run
// through the context and never appears in an event or a log line.
type Credentials struct {
	KV jetstream.KeyValue
}

// Put stores the run's key and reports whether it did. An empty key
// stores nothing.
func (c *Credentials) Put(ctx context.Context, runID, apiKey string) (bool, error) {
	if c == nil || c.KV == nil || apiKey == "" {
		return false, nil
	}
	if _, err := c.KV.Put(ctx, credentialKey(runID), []byte(apiKey)); err != nil {
		return false, fmt.Errorf("handlers: store credentials: %w", err)
	}
	return true, nil
}

// Context returns ctx carrying the run's key for skill calls, or ctx
// unchanged when the run has none (the worker's configured key applies).
// Runs whose caller sent no key cost no lookup.
func (c *Credentials) Context(ctx context.Context, req orch.RunRequest) (context.Context, error) {
	if c == nil || c.KV == nil || !req.KeyForwarded {
		return ctx, nil
	}
	e, err := c.KV.Get(ctx, credentialKey(req.RunID))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return ctx, nil
	}
	if err != nil {
		return ctx, fmt.Errorf("handlers: read credentials: %w", err)
	}
	return skills.WithAPIKey(ctx, string(e.Value())), nil
}

// Forget deletes the key of run runID, whose request is req, once the run
// has ended. A run whose caller sent no key has none to delete: it costs
// nothing (a run ended without its request, such as a dead-lettered one,
// is purged all the same).
func (c *Credentials) Forget(ctx context.Context, runID string, req orch.RunRequest) {
	if c == nil || c.KV == nil || req.RunID == runID && !req.KeyForwarded {
		return
	}
	_ = c.KV.Purge(ctx, credentialKey(runID))
}

func credentialKey(runID string) string { return kvs.Key("run/" + runID) }
