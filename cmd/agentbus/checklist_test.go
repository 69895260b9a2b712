package main

// Tests named after the items of the seed 000 §12 acceptance checklist that
// are proved end to end, through a running agentbus.

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills/demo"
	"github.com/agentbus/agentbus/store"
)

// startStackWith starts an all-in-one stack serving a demo Skill Service
// configured by demoCfg, and returns both.
func startStackWith(t *testing.T, demoCfg demo.Config) (*app.Stack, *demo.Service) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	svc := demo.NewService(demoCfg)
	s, err := app.StartStack(ctx, held(t, app.StackConfig{DataDir: t.TempDir(), NATSPort: -1, HTTPAddr: "127.0.0.1:0",
		Log: zerolog.Nop(), Skills: svc.Handler(), Process: app.Config{AckWait: 2 * time.Second}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, svc
}

// TestReplan_SkillFailingOnceReplansAndAnswers: a demo skill that fails on
// its first call produces a run with replan_count 1 and a correct answer,
// and GET /agent/plans/{id} shows the revision.
func TestReplan_SkillFailingOnceReplansAndAnswers(t *testing.T) {
	s, svc := startStackWith(t, demo.Config{FailFirst: map[string]int{demo.SkillEngagementAnalytics: 1}})
	res := postRun(t, "http://"+s.IngressAddr, orch.RunRequest{TenantID: "demo", UserID: "u", SessionID: "s-replan", Message: demoTask})
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("run ended %s: %s", res.TerminalCode, res.Response)
	}
	outletCalls := svc.Calls(demo.SkillOutletList)
	assertRanked(t, res.Response, expectedRanking(t, s.SkillsURL, "demo"))

	finalPlan(t, s, res.TenantID, res.PlanID) // the projector has caught up
	req, err := http.NewRequest(http.MethodGet, "http://"+s.IngressAddr+"/agent/plans/"+res.PlanID, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Tenant-Id", res.TenantID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Plan store.Plan `json:"plan"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	p := body.Plan
	if p.ReplanCount != 1 || len(p.ReplanHistory) != 1 || p.Status != store.PlanStatusComplete {
		t.Fatalf("plan: status %s, replan_count %d, history %+v", p.Status, p.ReplanCount, p.ReplanHistory)
	}
	h := p.ReplanHistory[0]
	if h.FailedStep != 2 || h.Trigger != orch.OutcomeFailed {
		t.Fatalf("replan record %+v, want step 2 failed", h)
	}
	// Step 1 completed once and was kept; step 2 was revised and step 3
	// replaced it.
	statuses := map[int]string{}
	for _, st := range p.Steps {
		statuses[st.StepIndex] = st.Status
	}
	if statuses[1] != store.StepStatusComplete || statuses[2] != store.StepStatusRevised || statuses[3] != store.StepStatusComplete || len(p.Steps) != 3 {
		t.Fatalf("step statuses %v", statuses)
	}
	if outletCalls != 1 {
		t.Fatalf("the completed step ran %d times, want once", outletCalls)
	}
}

// TestBoundary_ChatAPIReplacedByNATSPublisher: the Chat API is replaceable
// without touching the service: any NATS publisher can submit a run and
// read its answer, with no ingress involved.
func TestBoundary_ChatAPIReplacedByNATSPublisher(t *testing.T) {
	s, _ := startStackWith(t, demo.Config{})
	got := make(chan orch.RunResult, 1)
	sub, err := s.Deps.NC.Subscribe("agent.run.finished.viaNATS", func(m *nats.Msg) {
		ev, err := events.FromMsg(m.Header, m.Data)
		var r orch.RunResult
		if err == nil && events.Decode(ev, &r) == nil {
			got <- r
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	req := orch.RunRequest{RunID: "run-nats-1", TenantID: "viaNATS", UserID: "u", SessionID: "s1", Message: demoTask}
	ev, err := events.New(req.RunID, events.TypeRunRequested, events.Meta{Tenant: req.TenantID, Session: req.SessionID, Run: req.RunID}, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := events.Publish(context.Background(), s.Deps.JS, ev); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.RunID != req.RunID || r.TerminalCode != orch.CodeSuccess {
			t.Fatalf("result %+v", r)
		}
		assertRanked(t, r.Response, expectedRanking(t, s.SkillsURL, "viaNATS"))
	case <-time.After(20 * time.Second):
		t.Fatal("no run.finished for a run submitted on NATS")
	}
}

// TestReplan_SkillTimeoutReplansOnFirstFailure: a skill call that hangs
// past SKILL_TIMEOUT fails its step at once and the run replans around it,
// on the first failure, instead of redelivering the turn into the skill
// again; the replanned step's call answers and the run succeeds.
func TestReplan_SkillTimeoutReplansOnFirstFailure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	svc := demo.NewService(demo.Config{HangFirst: map[string]int{demo.SkillEngagementAnalytics: 1}})
	s, err := app.StartStack(ctx, held(t, app.StackConfig{DataDir: t.TempDir(), NATSPort: -1, HTTPAddr: "127.0.0.1:0",
		Log: zerolog.Nop(), Skills: svc.Handler(), Process: app.Config{AckWait: 2 * time.Second, SkillTimeout: 500 * time.Millisecond}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	start := time.Now()
	res := postRun(t, "http://"+s.IngressAddr, orch.RunRequest{TenantID: "demo", UserID: "u", SessionID: "s-timeout", Message: demoTask})
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("run ended %s: %s", res.TerminalCode, res.Response)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the run took %s: the hung call was waited on, not timed out", took)
	}
	p, _ := finalPlan(t, s, res.TenantID, res.PlanID)
	if p.ReplanCount != 1 || len(p.ReplanHistory) != 1 || !strings.Contains(p.ReplanHistory[0].Reason, "skill_timeout") {
		t.Fatalf("plan: replan_count %d, history %+v; want one replan for the skill timeout", p.ReplanCount, p.ReplanHistory)
	}
	// The hung call and the replanned step's call: nothing redelivered
	// into the skill.
	if n := svc.Calls(demo.SkillEngagementAnalytics); n != 1 {
		t.Errorf("engagement_analytics executed %d times after the hang, want 1 (the replanned step's)", n)
	}
}
