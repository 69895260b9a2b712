package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills/demo"
)

// scrape reads the Prometheus metrics at url.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	return mfs
}

// sample sums the series of metric name whose labels include want: a
// counter's or gauge's value, a histogram's count. ok is false when no
// series matches.
func sample(mfs map[string]*dto.MetricFamily, name string, want map[string]string) (sum float64, ok bool) {
	mf := mfs[name]
	if mf == nil {
		return 0, false
	}
next:
	for _, m := range mf.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		ok = true
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum, ok
}

// TestMetrics_EveryProcessCountsAKnownRun scrapes /metrics of each process
// of a multi-process deployment after one known run and one malformed
// event: the router counts the run it ended, the executor each skill call
// the Skill Service executed, the model calls their tokens, every role
// its acked messages with their handling times and its consumer's lag,
// and the router the dead letter.
func TestMetrics_EveryProcessCountsAKnownRun(t *testing.T) {
	c := newCluster(t, demo.Config{})
	c.startAll(1)
	res := postRun(t, c.ingURL, orch.RunRequest{TenantID: "demo", UserID: "u", SessionID: "s-metrics", Message: demoTask})
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("run ended %s: %s", res.TerminalCode, res.Response)
	}
	// A run request with no run id: dead-lettered on its first delivery.
	_, js := connect(t, c.nats)
	bad, err := events.New("metrics-malformed", events.TypeRunRequested, events.Meta{Tenant: "demo", Session: "s1"},
		map[string]any{"tenant_id": "demo"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := events.Publish(ctx, js, bad); err != nil {
		t.Fatal(err)
	}

	router := scrape(t, c.metrics["router"])
	eventually(t, 10*time.Second, "the router to count the dead letter", func() bool {
		router = scrape(t, c.metrics["router"])
		n, _ := sample(router, "agentbus_messages_total", map[string]string{"role": "router", "type": "run.requested", "outcome": "dead_lettered"})
		return n == 1
	})
	if n, _ := sample(router, "agentbus_messages_total", map[string]string{"role": "router", "type": "run.requested", "outcome": "acked"}); n != 1 {
		t.Errorf("router acked %v run requests, want 1", n)
	}
	if n, _ := sample(router, "agentbus_runs_finished_total", map[string]string{"terminal_code": orch.CodeSuccess, "status": orch.PlanComplete}); n != 1 {
		t.Errorf("runs finished SUCCESS: %v, want 1", n)
	}
	handled, _ := sample(router, "agentbus_messages_total", map[string]string{"role": "router"})
	if timed, _ := sample(router, "agentbus_handle_seconds", map[string]string{"role": "router"}); timed != handled || handled < 4 {
		t.Errorf("router: %v messages, %v timed", handled, timed)
	}

	executor := scrape(t, c.metrics["executor1"])
	for _, skill := range []string{demo.SkillOutletList, demo.SkillEngagementAnalytics} {
		n, _ := sample(executor, "agentbus_skill_calls_total", map[string]string{"skill": skill, "outcome": "ok"})
		if d, _ := sample(executor, "agentbus_skill_call_seconds", map[string]string{"skill": skill}); n != float64(c.skills.Calls(skill)) || n != d || n == 0 {
			t.Errorf("%s: %v calls counted, %v timed, the service executed %d", skill, n, d, c.skills.Calls(skill))
		}
	}
	var calls, tokens float64
	for _, proc := range []string{"router", "planner", "executor1"} {
		mfs := scrape(t, c.metrics[proc])
		n, _ := sample(mfs, "agentbus_model_calls_total", map[string]string{"outcome": "ok"})
		in, _ := sample(mfs, "agentbus_model_tokens_total", map[string]string{"kind": "input"})
		calls, tokens = calls+n, tokens+in
	}
	if calls != float64(res.Usage.Calls) || tokens != float64(res.Usage.InputTokens) || calls == 0 {
		t.Errorf("model calls %v and input tokens %v counted; the run's usage says %d and %d", calls, tokens, res.Usage.Calls, res.Usage.InputTokens)
	}

	for proc, roles := range map[string][]string{"router": {"router"}, "planner": {"planner"}, "executor1": {"executor"},
		"aggregator": {"aggregator", "projector"}} {
		mfs := scrape(t, c.metrics[proc])
		for _, role := range roles {
			// A group of one step joins without the aggregator.
			if n, _ := sample(mfs, "agentbus_messages_total", map[string]string{"role": role, "outcome": "acked"}); n == 0 && role != "aggregator" {
				t.Errorf("%s: no acked messages counted", role)
			}
			if _, ok := sample(mfs, "agentbus_consumer_pending", map[string]string{"role": role}); !ok {
				t.Errorf("%s: no consumer lag", role)
			}
			if _, ok := sample(mfs, "agentbus_consumer_ack_pending", map[string]string{"role": role}); !ok {
				t.Errorf("%s: no ack-pending", role)
			}
		}
	}
	if _, ok := sample(scrape(t, c.metrics["ingress"]), "go_goroutines", nil); !ok {
		t.Error("the ingress serves no /metrics")
	}
}
