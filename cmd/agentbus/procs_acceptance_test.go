package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/events/eventstest"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills/demo"
)

const demoTask = "List the active outlets and rank them by engagement"

func connect(t *testing.T, s *server.Server) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	return eventstest.Connect(t, s)
}

// TestMultiProcess runs the five binaries as OS processes against one
// nats-server over TCP and completes a run through the ingress.
func TestMultiProcess(t *testing.T) {
	c := newCluster(t, demo.Config{})
	c.startAll(1)
	res := postRun(t, c.ingURL, orch.RunRequest{TenantID: "demo", UserID: "u", SessionID: "s-multi", Message: demoTask})
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("run ended %s: %s", res.TerminalCode, res.Response)
	}
	assertRanked(t, res.Response, expectedRanking(t, c.skURL, "demo"))
}

// TestRedeliveryAfterExecutorKill kills the executor with SIGKILL while it
// holds an unacked step (its skill call is in flight), starts a new one,
// and checks the run still completes with no skill executed twice and no
// step finished twice.
func TestRedeliveryAfterExecutorKill(t *testing.T) {
	c := newCluster(t, demo.Config{Latency: 1500 * time.Millisecond})
	procs := c.startAll(1)
	done := make(chan orch.RunResult, 1)
	go func() {
		done <- postRun(t, c.ingURL, orch.RunRequest{TenantID: "demo", UserID: "u", SessionID: "s-kill", Message: demoTask})
	}()
	eventually(t, 20*time.Second, "the executor to hold a step", func() bool { return c.ackPending(handlers.RoleExecutor) > 0 })
	procs["executor1"].Kill()
	c.start("executor")

	select {
	case res := <-done:
		if res.TerminalCode != orch.CodeSuccess {
			t.Fatalf("run ended %s: %s", res.TerminalCode, res.Response)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("run did not complete after the executor was replaced")
	}
	for key, n := range c.skills.Invocations() {
		if n != 1 {
			t.Fatalf("skill call %q executed %d times", key, n)
		}
	}
	if n := len(c.skills.Invocations()); n != 2 {
		t.Fatalf("%d distinct skill executions, want 2 (one per step)", n)
	}
	_, js := connect(t, c.nats)
	// Each step is its group's only member, so its executor joins the
	// group itself: one step.joined per step, never two.
	joined := readAll[orch.StepJoined](t, js, "agent.step.joined.demo")
	seen := map[int]bool{}
	for _, j := range joined {
		if seen[j.Result.Step] {
			t.Fatalf("step %d finished twice", j.Result.Step)
		}
		seen[j.Result.Step] = true
	}
	if len(seen) != 2 {
		t.Fatalf("finished steps %v, want 2", seen)
	}
}

// TestTwoExecutorsShareWork starts two executor processes with one slot
// each and submits concurrent runs: both executors handle steps.
func TestTwoExecutorsShareWork(t *testing.T) {
	c := newCluster(t, demo.Config{Latency: 100 * time.Millisecond}, "CONCURRENCY=1")
	procs := c.startAll(2)
	const runs = 6
	var wg sync.WaitGroup
	results := make(chan orch.RunResult, runs)
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results <- postRun(t, c.ingURL, orch.RunRequest{TenantID: "demo", UserID: "u", SessionID: fmt.Sprintf("s-share-%d", i), Message: demoTask})
		}()
	}
	wg.Wait()
	close(results)
	for res := range results {
		if res.TerminalCode != orch.CodeSuccess {
			t.Fatalf("run ended %s: %s", res.TerminalCode, res.Response)
		}
	}
	for _, name := range []string{"executor1", "executor2"} {
		handled := strings.Count(procs[name].logs.String(), `"type":"io.agentbus.step.`)
		if handled == 0 {
			t.Fatalf("%s handled no step messages", name)
		}
		t.Logf("%s handled %d step messages", name, handled)
	}
}

// presetConfig writes value under key in the config bucket before the
// processes start (bootstrapping their topology first): their seeding
// never overwrites an existing key.
func presetConfig(t *testing.T, js jetstream.JetStream, key string, value []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := events.Bootstrap(ctx, js, app.Topology(events.Topology{AckWait: 2 * time.Second})); err != nil {
		t.Fatal(err)
	}
	cfg, err := js.KeyValue(ctx, handlers.BucketConfig)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Put(ctx, key, value); err != nil {
		t.Fatal(err)
	}
}
