package runctl_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/runctl"
)

// TestUntrustedPolicyFollowsTheConfigKeys: the taint and injection
// policies default to gate and record, follow their config keys per
// tenant (a tenant's entry over "*"), keep the policy in force on an
// invalid edit and return to the defaults when a key is deleted.
func TestUntrustedPolicyFollowsTheConfigKeys(t *testing.T) {
	env := handlerstest.NewEnv(t)
	ctx := handlerstest.Ctx(t)
	var none *runctl.UntrustedPolicy
	if none.TaintRelaxed("acme") || none.InjectionStops("acme") {
		t.Fatal("a nil policy is not the default")
	}
	wctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := runctl.NewUntrustedPolicy(env.Config)
	if err := p.Start(wctx); err != nil {
		t.Fatal(err)
	}
	if p.TaintRelaxed(handlerstest.Tenant) || p.InjectionStops(handlerstest.Tenant) {
		t.Fatal("without the keys the policy is not gate and record")
	}
	put := func(key, v string) {
		if _, err := env.Config.Put(ctx, key, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	put(runctl.ConfigKeyTaintPolicy, `{"*":"relaxed","`+handlerstest.Tenant+`":"gate"}`)
	put(runctl.ConfigKeyInjectionPolicy, `{"`+handlerstest.Tenant+`":"stop"}`)
	within(t, func() bool {
		return p.TaintRelaxed("acme") && !p.TaintRelaxed(handlerstest.Tenant) && p.InjectionStops(handlerstest.Tenant) && !p.InjectionStops("acme")
	})
	put(runctl.ConfigKeyTaintPolicy, `{"*":"off"}`) // invalid: the policy in force stays
	if err := env.Config.Delete(ctx, runctl.ConfigKeyInjectionPolicy); err != nil {
		t.Fatal(err)
	}
	within(t, func() bool { return !p.InjectionStops(handlerstest.Tenant) }) // applied after the invalid edit
	if !p.TaintRelaxed("acme") {
		t.Fatal("an invalid edit changed the taint policy")
	}
	for _, bad := range []string{`{"*":"off"}`, `["relaxed"]`} {
		if _, err := runctl.ParseTaintPolicy([]byte(bad)); err == nil {
			t.Errorf("taint_policy %s parsed", bad)
		}
	}
	if _, err := runctl.ParseInjectionPolicy([]byte(`{"*":"relaxed"}`)); err == nil {
		t.Error("an injection_policy of a taint choice parsed")
	}
}

// within waits up to 5 s for cond.
func within(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("the condition did not hold within 5 s")
}
