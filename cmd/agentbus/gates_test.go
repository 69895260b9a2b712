package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/skills/demo"
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
	patterns := make([]json.RawMessage, len(handlers.DefaultPatterns))
	for i, p := range handlers.DefaultPatterns {
		p.GateTTLS = 4
		patterns[i], _ = json.Marshal(p)
	}
	b, _ := json.Marshal(patterns)
	presetConfig(t, js, handlers.ConfigKeyPatterns, b)
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
	gates, _ := js.KeyValue(ctx, handlers.BucketGates)
	cancels, _ := js.KeyValue(ctx, handlers.BucketCancels)
	if len(runs) != want {
		t.Fatalf("%d recorded runs, want %d", len(runs), want)
	}
	for id, r := range runs {
		rep := handlers.ReplayRun(id, r.msgs, controlsOf(ctx, gates, cancels, r.tenant, id))
		if rep.Decisions == 0 || rep.Code == "" || len(rep.Divergences) > 0 {
			t.Errorf("replay of %s: %d decisions, code %q, divergences %+v", id, rep.Decisions, rep.Code, rep.Divergences)
		}
	}
}

// listGates reads GET /agent/runs/{run_id}/approvals.
func listGates(t *testing.T, ctx context.Context, base, runID string) []handlers.GateView {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/agent/runs/"+runID+"/approvals", nil)
	req.Header.Set("X-Tenant-Id", "demo")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Gates []handlers.GateView `json:"gates"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&body) != nil {
		t.Fatalf("GET approvals: %s", resp.Status)
	}
	return body.Gates
}
