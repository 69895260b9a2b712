package domain_test

import (
	"testing"

	"github.com/agentbus/agentbus/domain"
)

func TestUsageAddSumsEveryField(t *testing.T) {
	a := domain.Usage{InputTokens: 10, OutputTokens: 2, CachedInputTokens: 4, CostUSD: 0.5, Calls: 1}
	b := domain.Usage{InputTokens: 5, OutputTokens: 3, CachedInputTokens: 1, CostUSD: 0.25, Calls: 2}
	want := domain.Usage{InputTokens: 15, OutputTokens: 5, CachedInputTokens: 5, CostUSD: 0.75, Calls: 3}
	if got := a.Add(b); got != want {
		t.Fatalf("Add = %+v, want %+v", got, want)
	}
}

func TestCallUsageCountsOnlyAnsweredCalls(t *testing.T) {
	ok := domain.Call{Task: domain.TaskAct, InputTokens: 7, OutputTokens: 3, CachedTokens: 2, CostUSD: 0.1}
	if u := ok.Usage(); u != (domain.Usage{InputTokens: 7, OutputTokens: 3, CachedInputTokens: 2, CostUSD: 0.1, Calls: 1}) {
		t.Fatalf("answered call's usage = %+v", u)
	}
	failed := domain.Call{Task: domain.TaskAct, InputTokens: 7, Error: "provider unavailable"}
	if u := failed.Usage(); u.Calls != 0 || u.InputTokens != 7 {
		t.Fatalf("failed call's usage = %+v: tokens sent are counted, the call is not", u)
	}
}
