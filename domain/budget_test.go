package domain

import "testing"

// TestWithDefaultDailyTokens: the default is a "*" tenant quota, added
// without changing the policy it was given; an operator's "*" (even an
// empty one) and 0 leave the policy as it is.
func TestWithDefaultDailyTokens(t *testing.T) {
	p := BudgetPolicy{Quotas: &Quotas{Tenants: map[string]TokenQuota{"acme": {MonthlyTokens: 5}}}}
	got := p.WithDefaultDailyTokens(100_000)
	if got.Quotas.Tenants["*"].DailyTokens != 100_000 || got.Quotas.Tenants["acme"].MonthlyTokens != 5 {
		t.Fatalf("quotas %+v", got.Quotas.Tenants)
	}
	if _, changed := p.Quotas.Tenants["*"]; changed {
		t.Fatal("the policy given was changed")
	}
	if q := got.QuotasFor("beta", "", ""); len(q) != 1 || q[0].Tokens != 100_000 || q[0].Period != PeriodDay {
		t.Fatalf("another tenant's quotas %+v", q)
	}
	if q := got.QuotasFor("acme", "", ""); len(q) != 1 || q[0].Period != PeriodMonth {
		t.Fatalf("a tenant with its own quota gets %+v, want its own only", q)
	}
	none := BudgetPolicy{Quotas: &Quotas{Tenants: map[string]TokenQuota{"*": {}}}}
	if q := none.WithDefaultDailyTokens(100_000).QuotasFor("beta", "", ""); len(q) != 0 {
		t.Fatalf("an operator's empty * gets %+v", q)
	}
	if (BudgetPolicy{}).WithDefaultDailyTokens(0).Quotas != nil {
		t.Fatal("0 set a quota")
	}
	if q := (BudgetPolicy{}).WithDefaultDailyTokens(7).QuotasFor("t", "", ""); len(q) != 1 || q[0].Tokens != 7 {
		t.Fatalf("a policy with no quotas gets %+v", q)
	}
}
