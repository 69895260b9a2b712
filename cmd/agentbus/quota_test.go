package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
)

// TestDefaultDailyQuota: `agentbus up` with DEFAULT_DAILY_TOKENS gives a
// tenant the policy gives no quota that many tokens a day: over the HTTP
// API, the run that would pass it ends BUDGET_EXHAUSTED with the tenant's
// daily quota in its detail, and so does the next one, within what the
// first left: the two never use more than the quota between them.
func TestDefaultDailyQuota(t *testing.T) {
	url, _ := startUp(t, "DEFAULT_DAILY_TOKENS=3000")
	run := func(session string) orch.RunResult {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := runclient.NewHTTP(url, nil).Run(ctx, orch.RunRequest{TenantID: "quota-t", UserID: "u", SessionID: session,
			Message: "List the active outlets and rank them by engagement"})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	total := 0
	for _, session := range []string{"s-1", "s-2"} {
		start := time.Now()
		res := run(session)
		t.Logf("run in %s: %s in %v, %d calls, %d tokens", session, res.TerminalCode, time.Since(start), res.Usage.Calls,
			res.Usage.InputTokens+res.Usage.OutputTokens)
		if res.TerminalCode != orch.CodeBudgetExhausted {
			t.Fatalf("run in %s ended %s (%s), want BUDGET_EXHAUSTED: a demo run uses more than 3000 tokens", session, res.TerminalCode, res.Reason)
		}
		for _, want := range []string{`"scope":"tenant"`, `"subject":"quota-t"`, `"period":"day"`, `"tokens":3000`} {
			if !strings.Contains(string(res.Detail), want) {
				t.Errorf("run in %s: detail %s does not name %s", session, res.Detail, want)
			}
		}
		total += res.Usage.InputTokens + res.Usage.OutputTokens
	}
	if total > 3000 {
		t.Fatalf("the two runs used %d tokens, past the quota of 3000", total)
	}
}
