package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// TestPayloadRecords_TheExecutionRecordKeepsThemThroughTheWorkers: in an
// all-in-one stack (the projector reading its trails in batches), tenant
// demo keeps payload records: its run's execution record, read with GET
// /agent/executions/{id}, holds every model call's request and answer
// (the routing call's request names the task) and every tool result;
// tenant other's record holds none.
func TestPayloadRecords_TheExecutionRecordKeepsThemThroughTheWorkers(t *testing.T) {
	s := startStack(t)
	url := "http://" + s.IngressAddr
	ctx := context.Background()
	kv, err := s.Deps.JS.KeyValue(ctx, handlers.BucketConfig)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runctl.SetTenantChoice(ctx, kv, runctl.ConfigKeyPayloadRecords, "demo", runctl.RecordsKeep); err != nil {
		t.Fatal(err)
	}
	record := func(tenant, runID string) store.Execution {
		t.Helper()
		var rec store.Execution
		eventually(t, 15*time.Second, "the execution record of "+runID, func() bool {
			return fetchJSON(t, url+"/agent/executions/"+runID, tenant, &rec)
		})
		return rec
	}
	// The roles follow the choice within moments: a run that started
	// before they did keeps none, and the next is tried.
	var kept store.Execution
	for i := 0; len(kept.ModelCalls) == 0; i++ {
		if i == 10 {
			t.Fatal("no run of tenant demo kept payload records")
		}
		res := postRun(t, url, orch.RunRequest{TenantID: "demo", UserID: "u", SessionID: fmt.Sprintf("s-rec-%d", i), Message: demoTask})
		if res.TerminalCode != orch.CodeSuccess {
			t.Fatalf("run ended %s: %s", res.TerminalCode, res.Response)
		}
		kept = record("demo", res.RunID)
	}
	tasks := map[string]bool{}
	for _, c := range kept.ModelCalls {
		tasks[c.Task] = true
		if c.Request == "" || c.Response == "" && c.Error == "" {
			t.Errorf("model call %+v lacks its request or answer", c)
		}
	}
	if !tasks["route"] || !tasks["plan"] || !tasks["synthesize"] || !strings.Contains(kept.ModelCalls[0].Request, "outlets") {
		t.Errorf("the record's model calls %v; the first %+v", tasks, kept.ModelCalls[0])
	}
	results := map[string]bool{}
	for _, r := range kept.ToolResults {
		results[r.Name] = r.Result != ""
	}
	if !results["outlet_list"] || !results["engagement_analytics"] {
		t.Errorf("the record's tool results %+v", kept.ToolResults)
	}

	res := postRun(t, url, orch.RunRequest{TenantID: "other", UserID: "u", SessionID: "s-rec-other", Message: demoTask})
	if other := record("other", res.RunID); len(other.ModelCalls) != 0 || len(other.ToolResults) != 0 {
		t.Fatalf("tenant other's record keeps %d model calls, %d tool results", len(other.ModelCalls), len(other.ToolResults))
	}
}
