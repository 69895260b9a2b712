package main

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/ledger"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
	"github.com/agentbus/agentbus/skills/demo"
)

// TestCluster_AgentStreamLeaderKilledMidRun runs agentbus on a 3-node
// JetStream cluster of `agentbus nats` processes. The topology, set up
// first with one replica, is raised to three in place by the bootstrap
// (REPLICAS left to the server: 3 on a cluster). The role binaries hold
// every node's URL. While runs are in their skill calls, the node leading
// the AGENT stream is killed (SIGKILL): another node takes the lead, and
// every run completes exactly once, with the reference answer, every
// skill side effect executed once.
func TestCluster_AgentStreamLeaderKilledMidRun(t *testing.T) {
	nodes := startNATSCluster(t, 3)
	_, js := connectCluster(t, nodes)
	t.Cleanup(func() {
		if t.Failed() {
			logTopology(t, js)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := events.WaitJetStream(ctx, js); err != nil {
		t.Fatal(err)
	}
	for _, nd := range nodes {
		// The node's own nats-server reports into the process's log.
		if !strings.Contains(nd.p.logs.String(), `"component":"nats-server"`) {
			t.Errorf("node %s logged none of its nats-server's lines", nd.name)
		}
	}

	// A topology set up on one replica is raised to three in place.
	one := app.DefaultConfig()
	one.Replicas, one.AckWait = 1, 2*time.Second
	if err := app.Setup(ctx, js, one); err != nil {
		t.Fatal(err)
	}
	assertReplicas(t, ctx, js, 1)
	auto := app.DefaultConfig()
	auto.Replicas, auto.AckWait = 0, 2*time.Second
	if err := app.Setup(ctx, js, auto); err != nil {
		t.Fatal(err)
	}
	if auto.Replicas != app.ClusterReplicas {
		t.Fatalf("replicas resolved to %d on a cluster, want %d", auto.Replicas, app.ClusterReplicas)
	}
	assertReplicas(t, ctx, js, 3)

	svc := demo.NewService(demo.Config{Latency: 300 * time.Millisecond})
	hs := httptest.NewServer(svc.Handler())
	t.Cleanup(hs.Close)
	skURL := hs.URL + "/tenants/{tenant}/mcp"
	c := &cluster{t: t, bin: binaries(t), skills: svc, skURL: skURL,
		env: []string{"NATS_URL=" + clusterURLs(nodes), "SKILL_SERVICE_URL=" + skURL, "ACK_WAIT=2s", "LOG_LEVEL=debug"}}
	c.startAll(2)
	want := expectedRanking(t, skURL, "demo")

	client, err := runclient.New(ctx, js, runclient.Config{Source: "test", OnError: func(err error) { t.Logf("run client: %v", err) }})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	const runs = 8
	results := make([]orch.RunResult, runs)
	errs := make([]error, runs)
	ids := make([]string, runs)
	var wg sync.WaitGroup
	for i := range runs {
		ids[i] = uuid.NewString()
		req := orch.RunRequest{RunID: ids[i], TenantID: "demo", UserID: "u", SessionID: fmt.Sprintf("s-cluster-%d", i), Message: demoTask}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				// Published with the run id as its message id: a retry
				// through the leader change stores one request.
				pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
				p, err := client.Submit(pctx, req)
				pcancel()
				if err == nil {
					defer p.Close()
					results[i], errs[i] = p.Wait(ctx)
					return
				}
				if ctx.Err() != nil {
					errs[i] = err
					return
				}
				time.Sleep(200 * time.Millisecond)
			}
		}()
	}
	eventually(t, 60*time.Second, "the runs' first skill calls", func() bool { return svc.Calls(demo.SkillOutletList) >= runs/2 })
	leader := agentLeader(t, ctx, js)
	var killed *natsNode
	for _, nd := range nodes {
		if nd.name == leader {
			killed = nd
		}
	}
	if killed == nil {
		t.Fatalf("the AGENT stream's leader %q is none of the nodes", leader)
	}
	killed.p.Kill()
	t.Logf("killed %s, the AGENT stream's leader, after %d skill calls", leader, svc.Calls(demo.SkillOutletList))
	eventually(t, 60*time.Second, "a new AGENT stream leader", func() bool {
		l, err := streamLeader(ctx, js, events.StreamAgent)
		return err == nil && l != "" && l != leader
	})
	wg.Wait()
	if slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
		// While the roles still run: whether their pulls wait on the
		// consumers that hold the runs' messages.
		logTopology(t, js)
	}
	for i := range runs {
		if errs[i] != nil {
			t.Errorf("run %d: %v", i, errs[i])
			continue
		}
		if results[i].TerminalCode != orch.CodeSuccess {
			t.Fatalf("run %d ended %s: %s", i, results[i].TerminalCode, results[i].Response)
		}
		assertRanked(t, results[i].Response, want)
	}
	finished := map[string]int{}
	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer rcancel()
	for _, res := range storedResults(t, rctx, js) {
		finished[res.RunID]++
	}
	for i, id := range ids {
		if finished[id] != 1 {
			t.Errorf("run %d has %d run.finished in the stream, want 1", i, finished[id])
		}
	}
	if len(finished) != runs {
		t.Errorf("%d runs finished, want %d", len(finished), runs)
	}
	for key, n := range svc.Invocations() {
		if key != "" && n != 1 { // "": expectedRanking's own calls
			t.Errorf("idempotency key %q executed %d times", key, n)
		}
	}
}

// assertReplicas checks the replica count of the AGENT stream, its
// consumers' groups and a KV bucket.
func assertReplicas(t *testing.T, ctx context.Context, js jetstream.JetStream, want int) {
	t.Helper()
	for _, name := range []string{events.StreamAgent, events.StreamReply, "KV_" + ledger.BucketBudgets} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.CachedInfo().Config.Replicas; got != want {
			t.Fatalf("stream %s has %d replicas, want %d", name, got, want)
		}
	}
	for _, r := range app.Roles {
		cc := r.Consumer()
		var peers int
		eventually(t, 30*time.Second, fmt.Sprintf("consumer %s on %d replicas", cc.Name, want), func() bool {
			cons, err := js.Consumer(ctx, cc.Stream, cc.Name)
			if err != nil {
				return false
			}
			info := cons.CachedInfo()
			peers = 1
			if info.Cluster != nil {
				peers += len(info.Cluster.Replicas)
			}
			return peers == want
		})
	}
}

// storedResults reads every run.finished stored in the AGENT stream, one
// by one by sequence, to the end of the stream.
func storedResults(t *testing.T, ctx context.Context, js jetstream.JetStream) []orch.RunResult {
	t.Helper()
	var out []orch.RunResult
	for seq := uint64(1); ; {
		s, err := js.Stream(ctx, events.StreamAgent)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject("agent.run.finished.*"))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		ev, err := events.FromMsg(msg.Header, msg.Data)
		if err != nil {
			t.Fatal(err)
		}
		var res orch.RunResult
		if err := events.Decode(ev, &res); err != nil {
			t.Fatal(err)
		}
		out = append(out, res)
		seq = msg.Sequence + 1
	}
}

// agentLeader is the server leading the AGENT stream.
func agentLeader(t *testing.T, ctx context.Context, js jetstream.JetStream) string {
	t.Helper()
	l, err := streamLeader(ctx, js, events.StreamAgent)
	if err != nil || l == "" {
		t.Fatalf("no leader of the AGENT stream: %v", err)
	}
	return l
}

func streamLeader(ctx context.Context, js jetstream.JetStream, name string) (string, error) {
	ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s, err := js.Stream(ictx, name)
	if err != nil {
		return "", err
	}
	if ci := s.CachedInfo().Cluster; ci != nil {
		return ci.Leader, nil
	}
	return "", nil
}

// logTopology logs the leader, peers and state of every stream and role
// consumer, to tell a failure's cause.
func logTopology(t *testing.T, js jetstream.JetStream) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l := js.ListStreams(ctx)
	for si := range l.Info() {
		leader, reps := "", 0
		if si.Cluster != nil {
			leader = si.Cluster.Leader
			for _, r := range si.Cluster.Replicas {
				t.Logf("   %s peer %s current=%v offline=%v lag=%d", si.Config.Name, r.Name, r.Current, r.Offline, r.Lag)
			}
			reps = len(si.Cluster.Replicas)
		}
		t.Logf("stream %s R%d leader=%q peers=%d msgs=%d", si.Config.Name, si.Config.Replicas, leader, reps, si.State.Msgs)
	}
	if l.Err() != nil {
		t.Logf("list: %v", l.Err())
	}
	for _, stream := range []string{events.StreamAgent} {
		s, err := js.Stream(ctx, stream)
		if err != nil {
			t.Logf("stream %s: %v", stream, err)
			continue
		}
		for ci := range s.ListConsumers(ctx).Info() {
			leader := ""
			if ci.Cluster != nil {
				leader = ci.Cluster.Leader
			}
			t.Logf("consumer %s leader=%q delivered=%d/%d ackfloor=%d/%d ackpending=%d redelivered=%d pending=%d waiting=%d",
				ci.Name, leader, ci.Delivered.Consumer, ci.Delivered.Stream, ci.AckFloor.Consumer, ci.AckFloor.Stream,
				ci.NumAckPending, ci.NumRedelivered, ci.NumPending, ci.NumWaiting)
		}
	}
}
