//go:build containers

package containers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The tasks the deployment runs: the demo, and the menu whose 1 MB skill
// response goes through the sandbox (cmd/agentbus's tests run the same).
const (
	demoTask = "List the active outlets and rank them by engagement"
	menuTask = "List every menu item id with its category"
)

// slowSkills is the Skill Service's latency while the kill, stop and drain
// checks run, so that runs are in flight when a container goes.
const slowSkills = "2s"

// runResult is the answer of POST /agent/run.
type runResult struct {
	RunID        string `json:"run_id"`
	PlanID       string `json:"plan_id"`
	TerminalCode string `json:"terminal_code"`
	Response     string `json:"response"`
}

// client drives the ingress as the demo tenant.
type client struct {
	base, key string
	http      *http.Client
}

func (c *client) do(ctx context.Context, method, path string, body any, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/json")
	res, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %.300s", method, path, res.Status, raw)
	}
	return json.Unmarshal(raw, out)
}

// runTask submits a task and waits for its answer.
func (c *client) runTask(ctx context.Context, session, task string) (runResult, error) {
	var res runResult
	err := c.do(ctx, http.MethodPost, "/agent/run", map[string]string{"user_id": "ops", "session_id": session, "message": task}, &res)
	return res, err
}

// runAll submits the tasks at once and returns their results.
func (c *client) runAll(ctx context.Context, prefix string, n int) ([]runResult, []error) {
	res, errs := make([]runResult, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { res[i], errs[i] = c.runTask(ctx, fmt.Sprintf("%s-%d", prefix, i), demoTask) })
	}
	wg.Wait()
	return res, errs
}

// invocations reads the Skill Service's executions by idempotency key.
func invocations(ctx context.Context, base string) (map[string]int, map[string]int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/invocations", nil)
	if err != nil {
		return nil, nil, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	var rep struct {
		Executions map[string]int `json:"executions"`
		Replays    map[string]int `json:"replays"`
	}
	return rep.Executions, rep.Replays, json.NewDecoder(res.Body).Decode(&rep)
}

var apiKey = regexp.MustCompile(`abk_[A-Za-z0-9_-]+`)

// TestDeploymentInContainers starts deploy/compose/compose.yaml with podman
// (two executors) and checks, in order: the demo task answers (the cold
// start's figure), the menu task goes through bwrap in the executor's
// container, a killed executor loses no run and repeats no skill call, a
// NATS node stopped and started loses no run, and every role container
// stopped with SIGTERM drains and exits 0 within its grace period.
func TestDeploymentInContainers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	env := map[string]string{}
	s := newStack(t, env)
	s.scale["executor"] = 2
	if v := s.p.Services["executor"].Env["SANDBOX_ALLOW_UNSAFE"]; v != "" {
		t.Fatalf("the executor's environment sets SANDBOX_ALLOW_UNSAFE=%s", v)
	}
	figures := map[string]string{}
	defer func() {
		keys := make([]string, 0, len(figures))
		for k := range figures {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			t.Logf("figure %s: %s", k, figures[k])
		}
	}()

	t0 := time.Now()
	s.up(ctx)
	for _, name := range []string{"router", "planner", "executor", "aggregator", "ingress", "skills"} {
		for _, c := range s.replicas(name) {
			s.waitHealthy(ctx, c, 5*time.Minute)
		}
	}
	figures["healthy_s"] = fmt.Sprintf("%.1f", time.Since(t0).Seconds())
	key := s.tenantKey(ctx, "demo")
	c := &client{base: "http://" + s.hostAddr(ctx, s.p.Container("ingress", 1), 8080), key: key, http: &http.Client{Timeout: 6 * time.Minute}}

	t.Run("demo", func(t *testing.T) {
		res, err := c.runTask(ctx, "c-demo", demoTask)
		if err != nil || res.TerminalCode != "SUCCESS" {
			t.Fatalf("demo run: %v %+v", err, res)
		}
		figures["cold_start_to_first_answer_s"] = fmt.Sprintf("%.1f", time.Since(t0).Seconds())
	})

	t.Run("menu through the sandbox", func(t *testing.T) {
		t1 := time.Now()
		res, err := c.runTask(ctx, "c-menu", menuTask)
		if err != nil || res.TerminalCode != "SUCCESS" {
			t.Fatalf("menu run: %v %+v", err, res)
		}
		figures["menu_run_s"] = fmt.Sprintf("%.1f", time.Since(t1).Seconds())
		if !strings.Contains(res.Response, "… and ") {
			t.Errorf("menu answer: %.300s", res.Response)
		}
		var trace struct {
			Events []struct {
				EventType  string `json:"event_type"`
				ScriptHash string `json:"script_hash"`
			} `json:"events"`
		}
		deadline := time.Now().Add(30 * time.Second)
		executed := false
		for !executed && time.Now().Before(deadline) {
			if err := c.do(ctx, http.MethodGet, "/agent/plans/"+res.PlanID+"/trace", nil, &trace); err != nil {
				t.Fatal(err)
			}
			for _, e := range trace.Events {
				executed = executed || (e.EventType == "python_script.executed" && len(e.ScriptHash) == 64)
			}
			time.Sleep(time.Second)
		}
		if !executed {
			t.Fatalf("no python_script.executed in the menu run's trace (%d events)", len(trace.Events))
		}
		for _, ex := range s.replicas("executor") {
			if logs := s.logs(ctx, ex); !strings.Contains(logs, `"isolation":"bwrap"`) {
				t.Errorf("%s's sandbox is not bwrap: %s", ex, lastLines(logs, 5))
			}
		}
	})

	// The kill, stop and drain checks with slow skill calls, on a fresh
	// Skill Service (its record counts only their calls).
	env["SKILLS_LATENCY"] = slowSkills
	s.restartSkills(ctx, env)
	skillsBase := "http://" + s.hostAddr(ctx, s.p.Container("skills", 1), 7070)

	t.Run("executor killed mid-run", func(t *testing.T) {
		victim := s.p.Container("executor", 1)
		var res []runResult
		var errs []error
		done := make(chan struct{})
		go func() { res, errs = c.runAll(ctx, "c-kill", 4); close(done) }()
		time.Sleep(3 * time.Second) // the runs' first skill calls are in flight
		killed := time.Now()
		s.must(ctx, "kill", "--signal", "KILL", victim)
		<-done
		figures["executor_kill_to_last_answer_s"] = fmt.Sprintf("%.1f", time.Since(killed).Seconds())
		for i := range res {
			if errs[i] != nil || res[i].TerminalCode != "SUCCESS" {
				t.Errorf("run %d after the kill: %v %+v", i, errs[i], res[i])
			}
		}
		execs, replays, err := invocations(ctx, skillsBase)
		if err != nil {
			t.Fatal(err)
		}
		for k, n := range execs {
			if n != 1 {
				t.Errorf("skill call %s executed %d times", k, n)
			}
		}
		figures["executor_kill_skill_calls"] = fmt.Sprintf("%d executed once each, %d replayed from the idempotency record", len(execs), len(replays))
		s.ensureRunning(ctx, victim)
	})

	t.Run("NATS node stopped and started", func(t *testing.T) {
		node := s.p.Container("nats-1", 1)
		var res []runResult
		var errs []error
		done := make(chan struct{})
		go func() { res, errs = c.runAll(ctx, "c-nats", 4); close(done) }()
		time.Sleep(3 * time.Second)
		stopped := time.Now()
		s.must(ctx, "stop", node)
		figures["nats_node_stop_s"] = fmt.Sprintf("%.1f", time.Since(stopped).Seconds())
		s.must(ctx, "start", node)
		s.waitHealthy(ctx, node, 3*time.Minute)
		figures["nats_node_stop_to_healthy_s"] = fmt.Sprintf("%.1f", time.Since(stopped).Seconds())
		<-done
		figures["nats_node_stop_to_last_answer_s"] = fmt.Sprintf("%.1f", time.Since(stopped).Seconds())
		for i := range res {
			if errs[i] != nil || res[i].TerminalCode != "SUCCESS" {
				t.Errorf("run %d across the NATS restart: %v %+v", i, errs[i], res[i])
			}
		}
	})

	t.Run("SIGTERM drains every role", func(t *testing.T) {
		// The ingress first, while the roles answer its runs in flight (it
		// waits for them), then every role at once while their messages
		// are still in flight.
		go func() { _, _ = c.runAll(ctx, "c-drain", 4) }()
		time.Sleep(3 * time.Second)
		roles := s.replicas("ingress")
		for _, name := range []string{"router", "planner", "executor", "aggregator"} {
			roles = append(roles, s.replicas(name)...)
		}
		ingress := time.Now()
		if _, err := s.run(ctx, "stop", roles[0]); err != nil {
			t.Errorf("stop %s: %v", roles[0], err)
		}
		tookIngress := time.Since(ingress)
		var mu sync.Mutex
		var wg sync.WaitGroup
		took := map[string]time.Duration{roles[0]: tookIngress}
		for _, ctr := range roles[1:] {
			wg.Go(func() {
				start := time.Now()
				_, err := s.run(ctx, "stop", ctr) // SIGTERM, then SIGKILL after the stop timeout
				mu.Lock()
				defer mu.Unlock()
				took[ctr] = time.Since(start)
				if err != nil {
					t.Errorf("stop %s: %v", ctr, err)
				}
			})
		}
		wg.Wait()
		var parts []string
		for _, ctr := range roles {
			name := s.serviceOf(ctr)
			grace := s.p.Services[name].StopGrace
			code := s.exitCode(ctx, ctr)
			parts = append(parts, fmt.Sprintf("%s %.1fs", strings.TrimPrefix(ctr, s.p.Name+"-"), took[ctr].Seconds()))
			if code != "0" || took[ctr] >= grace {
				t.Errorf("%s exited %s after %s (grace %s): %s", ctr, code, took[ctr], grace, lastLines(s.logs(ctx, ctr), 5))
			}
			if name != "ingress" && !strings.Contains(s.logs(ctx, ctr), "drained; bye") {
				t.Errorf("%s did not drain: %s", ctr, lastLines(s.logs(ctx, ctr), 5))
			}
		}
		figures["sigterm_stop"] = strings.Join(parts, ", ")
	})
}

// tenantKey issues an API key for tenant with agentbus tenants create, as
// admin, in a container on the project's network.
func (s *stack) tenantKey(ctx context.Context, tenant string) string {
	s.t.Helper()
	setup := s.p.Services["setup"]
	out := s.must(ctx, "run", "--rm", "--network", s.p.Network(), "--env-file", s.envFile("setup"),
		setup.Image, "tenants", "create", "--tenant", tenant)
	key := apiKey.FindString(out)
	if key == "" {
		s.t.Fatalf("agentbus tenants create printed no key: %s", out)
	}
	return key
}

// envFile is the env file of a service's first replica.
func (s *stack) envFile(name string) string {
	return s.dir + "/" + s.p.Container(name, 1) + ".env"
}

// restartSkills replaces the Skill Service's container with one from the
// file interpolated with env.
func (s *stack) restartSkills(ctx context.Context, env map[string]string) {
	s.t.Helper()
	p, err := Load(composePath, func(k string) string { return env[k] })
	if err != nil {
		s.t.Fatal(err)
	}
	s.p.Services["skills"] = p.Services["skills"]
	s.must(ctx, "rm", "-f", "-t", "0", s.p.Container("skills", 1))
	s.start(ctx, "skills", 1)
	s.waitHealthy(ctx, s.p.Container("skills", 1), time.Minute)
}

// ensureRunning starts a container that is not running (a restart policy
// may have restarted it already) and waits until it is healthy.
func (s *stack) ensureRunning(ctx context.Context, container string) {
	s.t.Helper()
	if state, _ := s.run(ctx, "inspect", "--format", "{{.State.Running}}", container); state != "true" {
		s.must(ctx, "start", container)
	}
	s.waitHealthy(ctx, container, 3*time.Minute)
}

// serviceOf is the service a container of the project runs.
func (s *stack) serviceOf(container string) string {
	name := strings.TrimPrefix(container, s.p.Name+"-")
	return name[:strings.LastIndex(name, "-")]
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
