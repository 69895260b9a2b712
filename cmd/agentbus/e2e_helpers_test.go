package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/api/apitest"
	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/skills/demo"
	"github.com/agentbus/agentbus/store"
)

// postRun submits a synchronous run with the HTTP client and returns its
// result.
func postRun(t *testing.T, baseURL string, req orch.RunRequest) orch.RunResult {
	t.Helper()
	res, err := runclient.NewHTTP(baseURL, nil).Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// expectedRanking asks the demo Skill Service directly for the active
// outlets and their engagement ranking: the answer a run must contain.
func expectedRanking(t *testing.T, skillsURL, tenant string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := skills.NewClient(skills.Config{URL: skillsURL})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out, err := c.Call(ctx, tenant, demo.SkillOutletList, json.RawMessage(`{"status":"active"}`), "")
	if err != nil {
		t.Fatal(err)
	}
	var outlets struct {
		Outlets []struct {
			ID string `json:"outlet_id"`
		} `json:"outlets"`
	}
	if err := json.Unmarshal(out, &outlets); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, o := range outlets.Outlets {
		ids = append(ids, o.ID)
	}
	args, _ := json.Marshal(map[string]any{"outlet_ids": ids})
	out, err = c.Call(ctx, tenant, demo.SkillEngagementAnalytics, args, "")
	if err != nil {
		t.Fatal(err)
	}
	var ranked struct {
		Results []struct {
			Name string `json:"name"`
		} `json:"results"`
	}
	if err := json.Unmarshal(out, &ranked); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range ranked.Results {
		names = append(names, r.Name)
	}
	if len(names) == 0 {
		t.Fatal("demo service returned no ranking")
	}
	return names
}

// assertRanked checks that the answer lists exactly the expected outlets,
// in order.
func assertRanked(t *testing.T, answer string, want []string) {
	t.Helper()
	pos := -1
	for i, name := range want {
		p := strings.Index(answer, name)
		if p < 0 {
			t.Fatalf("answer lacks outlet %d %q:\n%s", i+1, name, answer)
		}
		if p < pos {
			t.Fatalf("outlet %q is out of order:\n%s", name, answer)
		}
		pos = p
	}
	if lines := strings.Count(strings.TrimSpace(answer), "\n"); lines != len(want) {
		t.Fatalf("answer has %d ranked lines, want %d:\n%s", lines, len(want), answer)
	}
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// finalPlan waits until the projector has written the final projection
// (complete or failed) of a finished run's plan and returns it.
func finalPlan(t *testing.T, s *app.Stack, tenantID, planID string) (store.Plan, int64) {
	t.Helper()
	var (
		p       store.Plan
		version int64
	)
	eventually(t, 10*time.Second, "the final projection of plan "+planID, func() bool {
		var err error
		p, version, err = s.Deps.Store.GetPlan(context.Background(), tenantID, planID)
		return err == nil && (p.Status == store.PlanStatusComplete || p.Status == store.PlanStatusFailed)
	})
	return p, version
}

// held is cfg with its ingress's traffic held to api/openapi.yaml: a
// request or answer that drifts from the document fails t.
func held(t *testing.T, cfg app.StackConfig) app.StackConfig {
	cfg.Ingress.Wrap = func(h http.Handler) http.Handler { return apitest.Wrap(t, h) }
	return cfg
}
