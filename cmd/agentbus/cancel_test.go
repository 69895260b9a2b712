package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/skills/demo"
	"github.com/agentbus/agentbus/store"
)

// toolCalls reports every skill call (an MCP tools/call of a catalog
// skill, not of a discovery tool) the Skill Service receives, by name, as
// the request arrives.
func toolCalls(next http.Handler, calls chan<- string) http.Handler {
	return watchCalls(next, calls, nil)
}

// watchCalls is toolCalls that also counts the notifications/cancelled
// the service receives in cancelled.
func watchCalls(next http.Handler, calls chan<- string, cancelled *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var rpc struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		discovery := []string{skills.ToolFindRelevantSkills, skills.ToolLoadSkill}
		if json.Unmarshal(body, &rpc) == nil && rpc.Method == "notifications/cancelled" && cancelled != nil {
			cancelled.Add(1)
		}
		if json.Unmarshal(body, &rpc) == nil && rpc.Method == "tools/call" && !slices.Contains(discovery, rpc.Params.Name) {
			select {
			case calls <- rpc.Params.Name:
			default:
			}
		}
		next.ServeHTTP(w, r)
	})
}

// TestCancelStopsRunBlockedInSlowSkill: a run whose first step is blocked
// in a slow skill is cancelled over HTTP. Another tenant's cancel of it
// answers 404 not_found and changes nothing; the tenant's own answers 202,
// and the run ends USER_CANCEL well before the skill would have answered,
// its skill call stopped (no effect, and the Skill Service told with
// notifications/cancelled), its second step never started, and one
// run.finished stored.
func TestCancelStopsRunBlockedInSlowSkill(t *testing.T) {
	const latency = 60 * time.Second
	svc := demo.NewService(demo.Config{Latency: latency})
	calls := make(chan string, 16)
	var cancelled atomic.Int32
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := app.StartStack(ctx, held(t, app.StackConfig{DataDir: t.TempDir(), NATSPort: -1, HTTPAddr: "127.0.0.1:0",
		Log: zerolog.Nop(), Process: app.Config{AckWait: 2 * time.Second}, Skills: watchCalls(svc.Handler(), calls, &cancelled)}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	api := runclient.NewHTTP("http://"+s.IngressAddr, nil)

	runIDs := make(chan string, 1)
	type ended struct {
		res runclient.Response
		err error
		at  time.Time
	}
	done := make(chan ended, 1)
	go func() {
		res, err := api.OnStart(func(id string) { runIDs <- id }).Stream(ctx,
			orch.RunRequest{TenantID: "demo", UserID: "u1", SessionID: "sess-cancel", Message: demoTask}, func(runclient.Chunk) {})
		done <- ended{runclient.ResponseOf(res), err, time.Now()}
	}()
	var runID string
	select {
	case runID = <-runIDs:
	case <-ctx.Done():
		t.Fatal("the run was not accepted")
	}
	select {
	case name := <-calls:
		if name != demo.SkillOutletList {
			t.Fatalf("the first skill called is %s, want %s", name, demo.SkillOutletList)
		}
	case e := <-done:
		t.Fatalf("the run ended before its skill call: %+v %v", e.res, e.err)
	case <-ctx.Done():
		t.Fatal("the first step never called its skill")
	}
	planID := orch.PlanID(runID)
	eventually(t, 10*time.Second, "the plan's projection", func() bool {
		_, _, err := s.Deps.Store.GetPlan(ctx, "demo", planID)
		return err == nil
	})

	// Another tenant's cancel is refused as for a missing run, and changes nothing.
	_, err = api.Cancel(ctx, "acme", runID)
	var refused *runclient.StatusError
	if !errors.As(err, &refused) || refused.StatusCode != http.StatusNotFound || refused.Code != "not_found" {
		t.Fatalf("acme's cancel: %v, want 404 not_found", err)
	}
	select {
	case e := <-done:
		t.Fatalf("the run ended after another tenant's cancel: %s", e.res.TerminalCode)
	case <-time.After(500 * time.Millisecond):
	}
	if _, err := api.Cancel(ctx, "demo", "no-such-run"); !errors.As(err, &refused) || refused.StatusCode != http.StatusNotFound {
		t.Fatalf("cancel of a missing run: %v, want 404 not_found", err)
	}

	asked := time.Now()
	got, err := api.Cancel(ctx, "demo", runID)
	if err != nil || got.RunID != runID || got.PlanID != planID || got.Status != runclient.StatusCancelling {
		t.Fatalf("cancel = %+v, %v", got, err)
	}
	var e ended
	select {
	case e = <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("the run did not end after its cancel")
	}
	if e.err != nil {
		t.Fatal(e.err)
	}
	if e.res.TerminalCode != orch.CodeUserCancel || e.res.Status != orch.PlanFailed {
		t.Fatalf("run ended %s/%s: %s", e.res.TerminalCode, e.res.Status, e.res.Response)
	}
	if took := e.at.Sub(asked); took > latency/4 {
		t.Errorf("the run ended %s after its cancel: it waited for the slow skill", took)
	}
	if n := svc.Calls(demo.SkillOutletList) + svc.Calls(demo.SkillEngagementAnalytics); n != 0 {
		t.Errorf("%d skill calls took effect; the one in flight must have been stopped", n)
	}
	// The Skill Service was told: the abandoned call's notifications/cancelled.
	eventually(t, 10*time.Second, "notifications/cancelled at the Skill Service", func() bool { return cancelled.Load() >= 1 })

	plan, _ := finalPlan(t, s, "demo", planID)
	if len(plan.Steps) != 2 || plan.Steps[0].Status != store.StepStatusFailed ||
		plan.Steps[1].Status != store.StepStatusPending || !plan.Steps[1].StartedAt.IsZero() {
		t.Fatalf("plan %s steps %+v: step 1 stopped, step 2 never started", plan.Status, plan.Steps)
	}
	var names []string
	eventually(t, 10*time.Second, "run.finished in the trace", func() bool {
		evs, err := s.Deps.Store.Trace(ctx, store.TraceQuery{TenantID: "demo", PlanID: planID})
		names = names[:0]
		for _, ev := range evs {
			names = append(names, ev.EventType)
		}
		return err == nil && slices.Contains(names, "run.finished")
	})
	if !slices.Contains(names, "run.cancelled") || !slices.Contains(names, "step_1.started") || slices.Contains(names, "step_2.started") {
		t.Errorf("trace %v: want run.cancelled and step 1 started, step 2 never", names)
	}
	stream, err := s.Deps.JS.Stream(ctx, events.StreamAgent)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter("agent.run.finished.demo"))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects["agent.run.finished.demo"]; n != 1 {
		t.Errorf("%d run.finished stored, want 1", n)
	}
	select {
	case name := <-calls:
		t.Errorf("skill %s called after the cancel", name)
	default:
	}
}
