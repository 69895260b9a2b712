package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats-server/v2/server"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/cmd/internal/procs"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/skills/demo"
	"github.com/agentbus/agentbus/store/embedded"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries builds the five role binaries and agentbus once per test run.
func binaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "agentbus-bin-")
		if buildErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		buildErr = procs.BuildRoles(ctx, binDir, true)
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
	store  string // the nats-server's JetStream store
	skills *demo.Service
	skURL  string
	env    []string
	ingURL string
	// metrics are the /metrics URLs of the processes startAll started.
	metrics map[string]string
}

// proc is one running role binary and its output.
type proc struct {
	*procs.Proc
	logs *procs.Buffer
}

func newCluster(t *testing.T, demoCfg demo.Config, env ...string) *cluster {
	t.Helper()
	bin := binaries(t)
	storeDir := t.TempDir()
	ns, err := events.RunServer(events.ServerConfig{Port: -1, StoreDir: storeDir})
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, bin: bin, nats: ns, store: storeDir}
	t.Cleanup(func() { c.nats.Shutdown(); c.nats.WaitForShutdown() })
	// Bootstrap once, with the processes' settings, before they start: the
	// in-process server runs under the race detector, and nats-server has a
	// data race between a stream update and a consumer creation that
	// processes bootstrapping a fresh server at the same moment can hit.
	_, js := connect(t, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := events.Bootstrap(ctx, js, events.Topology{AckWait: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := embedded.New(ctx, js, embedded.Config{}); err != nil {
		t.Fatal(err)
	}
	svc := demo.NewService(demoCfg)
	hs := httptest.NewServer(svc.Handler())
	t.Cleanup(hs.Close)
	c.skills, c.skURL = svc, hs.URL+"/tenants/{tenant}/mcp"
	c.env = append([]string{"NATS_URL=" + ns.ClientURL(), "SKILL_SERVICE_URL=" + c.skURL, "ACK_WAIT=2s", "LOG_LEVEL=debug"}, env...)
	return c
}

// restartNATS stops the nats-server and starts it again on the same port
// and store: clients reconnect, streams and buckets are as they were.
func (c *cluster) restartNATS() {
	c.t.Helper()
	port := c.nats.Addr().(*net.TCPAddr).Port
	c.nats.Shutdown()
	c.nats.WaitForShutdown()
	ns, err := events.RunServer(events.ServerConfig{Port: port, StoreDir: c.store})
	if err != nil {
		c.t.Fatal(err)
	}
	c.nats = ns
}

// start runs a role binary with extra environment.
func (c *cluster) start(role string, env ...string) *proc {
	c.t.Helper()
	logs := &procs.Buffer{}
	p, err := procs.Start(procs.Spec{Name: role, Path: filepath.Join(c.bin, role),
		Env: append(append([]string(nil), c.env...), env...), Output: logs})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() {
		p.Stop(syscall.SIGTERM, 15*time.Second)
		if c.t.Failed() {
			c.t.Logf("--- %s logs ---\n%s", role, tail(logs.String(), 4000))
		}
	})
	return &proc{Proc: p, logs: logs}
}

// startAll runs one of every role, the ingress on a free port, and waits
// until the ingress answers.
func (c *cluster) startAll(executors int) map[string]*proc {
	c.t.Helper()
	procs := map[string]*proc{}
	c.metrics = map[string]string{}
	// Every listener takes a port of the kernel's choosing and logs it: a
	// port picked free beforehand may be taken by a parallel test.
	start := func(name, role string) {
		procs[name] = c.start(role, "METRICS_ADDR=127.0.0.1:0")
	}
	for _, r := range []string{"router", "planner", "aggregator"} {
		start(r, r)
	}
	for i := range executors {
		start(fmt.Sprintf("executor%d", i+1), "executor")
	}
	procs["ingress"] = c.start("ingress", "INGRESS_ADDR=127.0.0.1:0")
	for name, p := range procs {
		if name != "ingress" {
			c.metrics[name] = "http://" + listenAddr(c.t, p, "metrics listening") + "/metrics"
		}
	}
	c.ingURL = "http://" + listenAddr(c.t, procs["ingress"], "ingress listening")
	c.metrics["ingress"] = c.ingURL + "/metrics"
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
	decl, _ := app.RoleNamed(role)
	cons, err := js.Consumer(ctx, decl.Consumer().Stream, role)
	if err != nil {
		return 0
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return 0
	}
	return info.NumAckPending
}

// listenAddr waits for p to log msg and returns the addr it names.
func listenAddr(t *testing.T, p *proc, msg string) string {
	t.Helper()
	var addr string
	eventually(t, 30*time.Second, msg, func() bool {
		for line := range strings.Lines(p.logs.String()) {
			var l struct{ Message, Addr string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Message == msg && l.Addr != "" {
				addr = l.Addr
				return true
			}
		}
		return false
	})
	return addr
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
