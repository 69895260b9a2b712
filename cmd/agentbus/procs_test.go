package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/skills"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries builds the five role binaries once per test run.
func binaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "agentbus-bin-")
		if buildErr != nil {
			return
		}
		for _, r := range []string{"router", "planner", "executor", "aggregator", "ingress"} {
			out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, r), "github.com/agentbus/agentbus/cmd/"+r).CombinedOutput()
			if err != nil {
				buildErr = fmt.Errorf("build %s: %v\n%s", r, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// cluster is a multi-process deployment: one nats-server over TCP, the
// demo Skill Service, and role binaries as OS processes.
type cluster struct {
	t      *testing.T
	bin    string
	nats   *server.Server
	skills *skills.DemoService
	skURL  string
	env    []string
	ingURL string
}

// syncBuffer is a goroutine-safe log sink for a process.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is one running role binary.
type proc struct {
	name string
	cmd  *exec.Cmd
	logs *syncBuffer
	done chan struct{}
}

func newCluster(t *testing.T, demo skills.DemoConfig, env ...string) *cluster {
	t.Helper()
	bin := binaries(t)
	ns, err := events.RunServer(events.ServerConfig{Port: -1, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	svc := skills.NewDemoService(demo)
	hs := httptest.NewServer(svc.Handler())
	t.Cleanup(hs.Close)
	c := &cluster{t: t, bin: bin, nats: ns, skills: svc, skURL: hs.URL + "/tenants/{tenant}/mcp"}
	c.env = append([]string{"NATS_URL=" + ns.ClientURL(), "SKILL_SERVICE_URL=" + c.skURL, "ACK_WAIT=2s", "LOG_LEVEL=debug"}, env...)
	return c
}

// start runs a role binary with extra environment.
func (c *cluster) start(role string, env ...string) *proc {
	c.t.Helper()
	cmd := exec.Command(filepath.Join(c.bin, role))
	cmd.Env = append(append(os.Environ(), c.env...), env...)
	p := &proc{name: role, cmd: cmd, logs: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	c.t.Cleanup(func() {
		p.stop(syscall.SIGTERM, 15*time.Second)
		if c.t.Failed() {
			c.t.Logf("--- %s logs ---\n%s", role, tail(p.logs.String(), 4000))
		}
	})
	return p
}

// stop signals the process and waits; it kills it after the grace time.
func (p *proc) stop(sig syscall.Signal, grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// startAll runs one of every role, the ingress on a free port, and waits
// until the ingress answers.
func (c *cluster) startAll(executors int) map[string]*proc {
	c.t.Helper()
	procs := map[string]*proc{}
	for _, r := range []string{"router", "planner", "aggregator"} {
		procs[r] = c.start(r)
	}
	for i := range executors {
		procs[fmt.Sprintf("executor%d", i+1)] = c.start("executor")
	}
	addr := freeAddr(c.t)
	procs["ingress"] = c.start("ingress", "INGRESS_ADDR="+addr)
	c.ingURL = "http://" + addr
	eventually(c.t, 30*time.Second, "the ingress to listen", func() bool {
		resp, err := http.Get(c.ingURL + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return procs
}

// ackPending returns how many messages role's consumer has delivered and not yet seen acked.
func (c *cluster) ackPending(role string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, js := connect(c.t, c.nats)
	cons, err := js.Consumer(ctx, events.StreamOf(role), role)
	if err != nil {
		return 0
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return 0
	}
	return info.NumAckPending
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
