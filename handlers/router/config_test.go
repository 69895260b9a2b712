package router_test

import (
	"testing"
	"time"

	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/router"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
)

// runConfig is a follower's configuration.
type runConfig struct {
	taskTypes []llm.TaskType
	patterns  []llm.Pattern
	policy    orch.BudgetPolicy
}

func current(f *router.ConfigFollower) (runConfig, error) {
	tt, ps, p, err := f.Current()
	return runConfig{tt, ps, p}, err
}

// TestConfigFollowerFollowsEdits: the follower starts from what the
// bucket holds, applies each edit once the watch delivers it, makes runs
// wait on an invalid budget policy (as a read of it would) and falls back
// to the defaults when a key is deleted.
func TestConfigFollowerFollowsEdits(t *testing.T) {
	env := handlerstest.NewEnv(t)
	ctx := handlerstest.Ctx(t)
	if _, err := env.Config.Put(ctx, router.ConfigKeyBudgets, []byte(`{"defaults":{"tool_calls":7}}`)); err != nil {
		t.Fatal(err)
	}
	f, err := router.FollowConfig(ctx, env.Config)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := current(f)
	if err != nil || rc.policy.Defaults["tool_calls"] != 7 || len(rc.taskTypes) != len(router.DefaultTaskTypes) || len(rc.patterns) != len(router.DefaultPatterns) {
		t.Fatalf("first configuration %+v (%v): want the stored policy and the default task types and patterns", rc, err)
	}
	until := func(what string, ok func(runConfig, error) bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if ok(current(f)) {
				return
			}
		}
		t.Fatalf("the follower never saw %s", what)
	}
	if _, err := env.Config.Put(ctx, router.ConfigKeyTaskTypes, []byte(`[{"name":"only","description":"the one task type","patterns":["react"],"default_pattern":"react"}]`)); err != nil {
		t.Fatal(err)
	}
	until("the edited task types", func(rc runConfig, err error) bool {
		return err == nil && len(rc.taskTypes) == 1 && rc.taskTypes[0].Name == "only"
	})
	if _, err := env.Config.Put(ctx, router.ConfigKeyBudgets, []byte(`{"defaults":{"tool_calls":-1}}`)); err != nil {
		t.Fatal(err)
	}
	until("the invalid policy", func(_ runConfig, err error) bool { return err != nil })
	if err := env.Config.Delete(ctx, router.ConfigKeyBudgets); err != nil {
		t.Fatal(err)
	}
	if err := env.Config.Delete(ctx, router.ConfigKeyTaskTypes); err != nil {
		t.Fatal(err)
	}
	until("the defaults after the deletes", func(rc runConfig, err error) bool {
		return err == nil && len(rc.policy.Defaults) == 0 && len(rc.taskTypes) == len(router.DefaultTaskTypes)
	})
}
