package main

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/router"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/skills/demo"
	"github.com/agentbus/agentbus/store"
)

// TestGates_ADestructiveSkillWaitsForAHumanOverHTTP runs the role binaries
// as separate processes, with the demo Skill Service's outlet_list
// annotated destructive. A run that calls it parks at a gate: POST
// /agent/run answers 202 with the approval packet and the skill is not
// called. Approved over HTTP (the approver recorded), it is called once
// and the run completes; denied, the run ends rejected; left alone, the
// gate's TTL (a JetStream scheduled message) expires it CONFIRM_REQUIRED.
func TestGates_ADestructiveSkillWaitsForAHumanOverHTTP(t *testing.T) {
	destructive := &skills.Annotations{ReadOnlyHint: mcp.ToBoolPtr(false), DestructiveHint: mcp.ToBoolPtr(true)}
	c := newCluster(t, demo.Config{Hints: map[string]*skills.Annotations{demo.SkillOutletList: destructive}})
	_, js := connect(t, c.nats)
	patterns := make([]json.RawMessage, len(router.DefaultPatterns))
	for i, p := range router.DefaultPatterns {
		p.GateTTLS = 4
		patterns[i], _ = json.Marshal(p)
	}
	b, _ := json.Marshal(patterns)
	presetConfig(t, js, router.ConfigKeyPatterns, b)
	c.startAll(1)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	as := func(user string) *runclient.HTTP {
		return runclient.NewHTTP(c.ingURL, &http.Client{Transport: userHeader{user: user}})
	}
	park := func(session string) orch.RunResult {
		t.Helper()
		before := c.skills.Calls(demo.SkillOutletList)
		res, err := as("asker").Run(ctx, orch.RunRequest{TenantID: "demo", UserID: "asker", SessionID: session, Message: demoTask})
		if err != nil {
			t.Fatal(err)
		}
		if !runclient.Parked(res) || res.Status != orch.PlanAwaitingGate {
			t.Fatalf("the run did not park: %s %s: %s", res.Status, res.TerminalCode, res.Response)
		}
		var g orch.GatePacket
		if err := json.Unmarshal(res.Detail, &g); err != nil || len(g.Actions) != 1 || g.Actions[0].Action != demo.SkillOutletList ||
			g.Actions[0].Risk != skills.ModeDestructive {
			t.Fatalf("packet %s (%v)", res.Detail, err)
		}
		if n := c.skills.Calls(demo.SkillOutletList) - before; n != 0 {
			t.Fatalf("the destructive skill ran %d times before any approval", n)
		}
		return res
	}
	gateOf := func(res orch.RunResult) string {
		var g orch.GatePacket
		_ = json.Unmarshal(res.Detail, &g)
		return g.Gate
	}

	// Approved.
	res := park("sess-gate-approve")
	gate := gateOf(res)
	var se *runclient.StatusError
	if _, err := as("lead").Control(ctx, "other", res.RunID, "approvals/"+gate, runclient.ApprovalRequest{Decision: "approve"}); !errors.As(err, &se) || se.Code != "not_found" {
		t.Fatalf("another tenant's approval: %v, want 404 not_found", err)
	}
	if _, err := runclient.NewHTTP(c.ingURL, nil).Control(ctx, "demo", res.RunID, "approvals/"+gate, runclient.ApprovalRequest{Decision: "approve"}); !errors.As(err, &se) || se.Code != "approver_required" {
		t.Fatalf("an anonymous approval: %v, want 400 approver_required", err)
	}
	ok, err := as("lead").Control(ctx, "demo", res.RunID, "approvals/"+gate, runclient.ApprovalRequest{Decision: "approve", Comment: "go"})
	if err != nil || ok.Decision != orch.GateApproved || ok.By != "lead" || ok.Status != runclient.StatusResuming {
		t.Fatalf("approve: %+v, %v", ok, err)
	}
	done, err := as("lead").Follow(ctx, "demo", res.RunID, func(runclient.Chunk) {})
	if err != nil || done.TerminalCode != orch.CodeSuccess {
		t.Fatalf("after approval: %+v, %v", done, err)
	}
	if n := c.skills.Calls(demo.SkillOutletList); n != 1 {
		t.Fatalf("the approved skill ran %d times, want once", n)
	}
	if _, err := as("lead").Control(ctx, "demo", res.RunID, "approvals/"+gate, runclient.ApprovalRequest{Decision: "deny"}); !errors.As(err, &se) || se.StatusCode != http.StatusConflict {
		t.Fatalf("denying an approved gate: %v, want 409", err)
	}
	gates := listGates(t, ctx, c.ingURL, res.RunID)
	if len(gates) != 1 || gates[0].Status != orch.GateApproved || gates[0].By != "lead" || gates[0].Comment != "go" {
		t.Fatalf("gates %+v", gates)
	}

	// Denied.
	res = park("sess-gate-deny")
	if _, err := as("lead").Control(ctx, "demo", res.RunID, "approvals/"+gateOf(res), runclient.ApprovalRequest{Decision: "deny", Comment: "no"}); err != nil {
		t.Fatal(err)
	}
	done, err = as("lead").Follow(ctx, "demo", res.RunID, func(runclient.Chunk) {})
	if err != nil || done.TerminalCode != orch.CodeUserCancel || !strings.Contains(done.Response, "not approved by lead: no") {
		t.Fatalf("after denial: %+v, %v", done, err)
	}

	// Expired: nobody decides within the gate's TTL.
	res = park("sess-gate-ttl")
	done, err = as("asker").Follow(ctx, "demo", res.RunID, func(runclient.Chunk) {})
	if err != nil || done.TerminalCode != orch.CodeConfirmRequired || !strings.Contains(done.Response, "expired") {
		t.Fatalf("after the TTL: %+v, %v", done, err)
	}
	if n := c.skills.Calls(demo.SkillOutletList); n != 1 {
		t.Fatalf("the skill ran %d times in all, want once (the approved run's)", n)
	}
	assertReplays(t, ctx, js, 3)
}

// assertReplays replays every run recorded in the AGENT stream, as
// `agentbus replay --all` does, and wants want runs re-derived without a
// divergence.
func assertReplays(t *testing.T, ctx context.Context, js jetstream.JetStream, want int) {
	t.Helper()
	runs, err := recordedRuns(ctx, js, "demo", time.Now().Add(-time.Hour), "")
	if err != nil {
		t.Fatal(err)
	}
	gates, _ := js.KeyValue(ctx, runctl.BucketGates)
	cancels, _ := js.KeyValue(ctx, handlers.BucketCancels)
	if len(runs) != want {
		t.Fatalf("%d recorded runs, want %d", len(runs), want)
	}
	for id, r := range runs {
		rep := runctl.ReplayRun(id, r.msgs, controlsOf(ctx, gates, cancels, r.tenant, id))
		if rep.Decisions == 0 || rep.Code == "" || len(rep.Divergences) > 0 {
			t.Errorf("replay of %s: %d decisions, code %q, divergences %+v", id, rep.Decisions, rep.Code, rep.Divergences)
		}
	}
}

// listGates reads GET /agent/runs/{run_id}/approvals.
func listGates(t *testing.T, ctx context.Context, base, runID string) []runctl.GateView {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/agent/runs/"+runID+"/approvals", nil)
	req.Header.Set("X-Tenant-Id", "demo")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Gates []runctl.GateView `json:"gates"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&body) != nil {
		t.Fatalf("GET approvals: %s", resp.Status)
	}
	return body.Gates
}

// TestInterruptResumeAndSteerOverHTTP: on the all-in-one, a streamed run
// is steered and interrupted while its first skill call is in flight. The
// steering message is traced (steer.applied) and the run parks paused at
// its next hop: its stream ends with the interrupt gate. Resumed over
// HTTP, it completes, each skill called once. A finished run refuses both.
func TestInterruptResumeAndSteerOverHTTP(t *testing.T) {
	svc := demo.NewService(demo.Config{Latency: 700 * time.Millisecond})
	calls := make(chan string, 16)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := app.StartStack(ctx, held(t, app.StackConfig{DataDir: t.TempDir(), NATSPort: -1, HTTPAddr: "127.0.0.1:0",
		Log: zerolog.Nop(), Process: app.Config{AckWait: 2 * time.Second}, Skills: toolCalls(svc.Handler(), calls)}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	api := runclient.NewHTTP("http://"+s.IngressAddr, &http.Client{Transport: userHeader{user: "ops"}})
	caller := runclient.NewHTTP("http://"+s.IngressAddr, nil)
	runIDs := make(chan string, 1)
	type ended struct {
		res orch.RunResult
		err error
	}
	done := make(chan ended, 1)
	go func() {
		res, err := caller.OnStart(func(id string) { runIDs <- id }).Stream(ctx,
			orch.RunRequest{TenantID: "demo", UserID: "u1", SessionID: "sess-interrupt", Message: demoTask}, func(runclient.Chunk) {})
		done <- ended{res, err}
	}()
	var runID string
	select {
	case runID = <-runIDs:
	case e := <-done:
		t.Fatalf("the run ended before it was accepted: %+v %v", e.res, e.err)
	case <-ctx.Done():
		t.Fatal("the run was not accepted")
	}
	select {
	case <-calls: // step 1's skill call is in flight
	case <-ctx.Done():
		t.Fatal("the first step never called its skill")
	}
	eventually(t, 10*time.Second, "the plan's projection", func() bool {
		_, _, err := s.Deps.Store.GetPlan(ctx, "demo", orch.PlanID(runID))
		return err == nil
	})
	if r, err := api.Control(ctx, "demo", runID, "steer", runclient.SteerRequest{Message: "mention the northern outlets first"}); err != nil || r.Status != runclient.StatusSteered {
		t.Fatalf("steer: %+v, %v", r, err)
	}
	if r, err := api.Control(ctx, "demo", runID, "interrupt", nil); err != nil || r.Status != runclient.StatusInterrupting || r.By != "ops" {
		t.Fatalf("interrupt: %+v, %v", r, err)
	}
	var e ended
	select {
	case e = <-done:
	case <-ctx.Done():
		t.Fatal("the interrupted run's stream did not end")
	}
	if e.err != nil || !runclient.Parked(e.res) || e.res.Status != orch.PlanPaused {
		t.Fatalf("the interrupted run: %+v, %v", e.res, e.err)
	}
	if n := svc.Calls(demo.SkillEngagementAnalytics); n != 0 {
		t.Fatalf("step 2 ran %d times while the run was paused", n)
	}
	r, err := api.Control(ctx, "demo", runID, "resume", nil)
	if err != nil || r.Status != runclient.StatusResuming || r.Decision != orch.GateApproved {
		t.Fatalf("resume: %+v, %v", r, err)
	}
	var envelopes []runclient.SessionProgress
	res, err := api.Follow(ctx, "demo", runID, func(c runclient.Chunk) {
		var p runclient.SessionProgress
		if c.MessageType == runclient.ChunkProgress && json.Unmarshal([]byte(c.Content), &p) == nil {
			envelopes = append(envelopes, p)
		}
	})
	if err != nil || res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("after resume: %+v, %v", res, err)
	}
	// Typed progress envelopes: the paused hop's names its gate; the
	// last counts completed steps of two and the budget left.
	paused := slices.IndexFunc(envelopes, func(p runclient.SessionProgress) bool {
		return p.Status == orch.PlanPaused && p.AwaitingGate != nil && p.AwaitingGate.Kind == orch.GateInterrupt
	})
	if len(envelopes) < 2 || paused < 0 ||
		envelopes[len(envelopes)-1].TotalStepCount != 2 || envelopes[len(envelopes)-1].CompletedStepCount < 1 ||
		envelopes[len(envelopes)-1].BudgetRemaining[orch.DimToolCalls] <= 0 {
		t.Fatalf("progress envelopes %+v", envelopes)
	}
	if svc.Calls(demo.SkillOutletList) != 1 || svc.Calls(demo.SkillEngagementAnalytics) != 1 {
		t.Fatalf("calls: outlet_list %d, engagement %d; want one each", svc.Calls(demo.SkillOutletList), svc.Calls(demo.SkillEngagementAnalytics))
	}
	var trace []store.Event
	eventually(t, 10*time.Second, "the steer in the trace", func() bool {
		trace, err = s.Deps.Store.Trace(ctx, store.TraceQuery{TenantID: "demo", PlanID: orch.PlanID(runID)})
		return err == nil && slices.ContainsFunc(trace, func(ev store.Event) bool { return ev.EventType == "steer.applied" })
	})
	// Once the projection has the run finished (it trails the run), an
	// interrupt is refused.
	eventually(t, 10*time.Second, "the finished plan's projection", func() bool {
		p, _, err := s.Deps.Store.GetPlan(ctx, "demo", orch.PlanID(runID))
		return err == nil && store.PlanFinished(p.Status)
	})
	var se *runclient.StatusError
	if _, err := api.Control(ctx, "demo", runID, "interrupt", nil); !errors.As(err, &se) || se.Code != "run_finished" {
		t.Fatalf("interrupting a finished run: %v, want 409 run_finished", err)
	}
}
