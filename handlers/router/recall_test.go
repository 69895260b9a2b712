package router_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/memory"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// TestRouterRecallsIntoTheRunState: a run's first hop recalls its user's
// fact into the run state the planner gets, and the trace records it
// (memory.recalled: its id, scope and score).
func TestRouterRecallsIntoTheRunState(t *testing.T) {
	env := handlerstest.NewEnv(t)
	ctx := handlerstest.Ctx(t)
	text := "I rank the active outlets by engagement every Monday"
	vec, err := memory.Embed(ctx, handlerstest.Embedder, text)
	if err != nil {
		t.Fatal(err)
	}
	key := handlerstest.Tenant + ":@user:" + handlerstest.User + ":habit"
	if _, err := env.Store.PutMemory(ctx, store.Memory{ID: key, Key: key, TenantID: handlerstest.Tenant, UserID: handlerstest.User,
		Scope: store.ScopeUser, Text: text, Embedding: vec, CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	r := handlerstest.NewRouter(t, env)
	r.Recall = &memory.Recall{Store: env.Store, Embedder: handlerstest.Embedder}
	ev := handlerstest.NewEvent(t, "run-recall", events.TypeRunRequested, handlerstest.RunRequest("run-recall", handlerstest.RankTask))
	outs, err := r.Handle(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	run := handlerstest.Decode[orch.PlanRequest](t, handlerstest.Only(t, outs, events.TypePlanRequested)).Run
	if m := run.Context.Memories; len(m) != 1 || m[0].ID != key || m[0].Text != text || m[0].Score <= 0 {
		t.Fatalf("the run state recalled %+v", m)
	}
	rec := handlerstest.AuditPayloads(t, outs, "memory.recalled")
	mems, _ := rec[0]["memories"].([]any)
	if m, _ := mems[0].(map[string]any); len(rec) != 1 || len(mems) != 1 || m["id"] != key || m["score"].(float64) <= 0 ||
		m["scope"] != store.ScopeUser {
		t.Fatalf("memory.recalled = %v", rec)
	}
}

// failingEmbedder is an embedder whose endpoint is down.
type failingEmbedder struct{}

func (failingEmbedder) Embed(context.Context, []string) ([][]float32, error) {
	return nil, errors.New("embeddings endpoint unavailable")
}
func (failingEmbedder) Dimension() int { return handlerstest.Embedder.Dimension() }

// TestRouterRunsOnWhenRecallFails: a recall that fails (its embedder is
// down) leaves the run without memories, not stopped: the trace says why
// (memory.recall_failed) and the run is planned.
func TestRouterRunsOnWhenRecallFails(t *testing.T) {
	env := handlerstest.NewEnv(t)
	r := handlerstest.NewRouter(t, env)
	r.Recall = &memory.Recall{Store: env.Store, Embedder: failingEmbedder{}}
	ev := handlerstest.NewEvent(t, "run-norecall", events.TypeRunRequested, handlerstest.RunRequest("run-norecall", handlerstest.RankTask))
	outs, err := r.Handle(handlerstest.Ctx(t), ev)
	if err != nil {
		t.Fatal(err)
	}
	run := handlerstest.Decode[orch.PlanRequest](t, handlerstest.Only(t, outs, events.TypePlanRequested)).Run
	failed := handlerstest.AuditPayloads(t, outs, "memory.recall_failed")
	if len(run.Context.Memories) != 0 || len(failed) != 1 || failed[0]["reason"] == "" {
		t.Fatalf("memories %+v, memory.recall_failed %v", run.Context.Memories, failed)
	}
}
