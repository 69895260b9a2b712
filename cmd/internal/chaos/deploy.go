package chaos

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentbus/agentbus/cmd/internal/procs"
)

// member is one process of the deployment, restarted under the same name,
// arguments and log file.
type member struct {
	name    string // "executor2"
	spec    procs.Spec
	logPath string

	mu         sync.Mutex
	proc       *procs.Proc
	starts     int
	expectExit bool // the harness is killing or stopping it
}

// deployment is the multi-process agentbus under test.
type deployment struct {
	h        *harness
	bin      string
	dir      string
	brokers  []*broker // one nats-server, or the nodes of a cluster
	natsURL  string    // every node's client URL, comma-separated
	skills   string    // host:port of the demo Skill Service
	ingress  string    // host:port of the ingress
	members  map[string]*member
	order    []string // start order
	closing  chan struct{}
	closeOne sync.Once
	wg       sync.WaitGroup
}

// roleNames returns the names of the role processes (the kill targets).
func (d *deployment) roleNames() []string {
	var names []string
	for _, n := range d.order {
		if !strings.HasPrefix(n, "nats") && n != "skills" {
			names = append(names, n)
		}
	}
	return names
}

func (d *deployment) executors() []string {
	var names []string
	for _, n := range d.order {
		if strings.HasPrefix(n, "executor") {
			names = append(names, n)
		}
	}
	return names
}

// newDeployment lays out the processes; start starts them.
func newDeployment(h *harness, bin, dir string) (*deployment, error) {
	cfg := h.cfg
	// Every port at once, so that no two are the same: nodes are restarted
	// on theirs, and a cluster's routes name each other's in advance.
	ports, err := freePorts(2 + 3*max(cfg.Cluster, 1))
	if err != nil {
		return nil, err
	}
	skillsPort, ingressPort := ports[0], ports[1]
	d := &deployment{
		h: h, bin: bin, dir: dir,
		skills: fmt.Sprintf("127.0.0.1:%d", skillsPort), ingress: fmt.Sprintf("127.0.0.1:%d", ingressPort),
		members: map[string]*member{}, closing: make(chan struct{}),
	}
	d.layoutBrokers(ports[2:])
	d.add("skills", filepath.Join(bin, "agentbus"), []string{"skills", "--addr", d.skills, "--latency", cfg.SkillLatency.String()}, nil)
	env := []string{
		"NATS_URL=" + d.natsURL, // REPLICAS is left to the servers: 3 on a cluster
		"SKILL_SERVICE_URL=http://" + d.skills + "/tenants/{tenant}/mcp",
		"ACK_WAIT=" + cfg.AckWait.String(),
		"MAX_DELIVER=" + strconv.Itoa(cfg.MaxDeliver),
		"LOG_LEVEL=debug", "STORE=embedded", "MODEL=offline", "CONCURRENCY=8",
	}
	for _, role := range []string{"router", "planner", "aggregator"} {
		d.add(role, filepath.Join(bin, role), nil, env)
	}
	for i := range cfg.Executors {
		d.add(fmt.Sprintf("executor%d", i+1), filepath.Join(bin, "executor"), nil, env)
	}
	// The harness proves durability, not the request limits: its bursts
	// of one tenant's runs must not be refused 429.
	d.add("ingress", filepath.Join(bin, "ingress"), nil, append(env, "INGRESS_ADDR="+d.ingress,
		"RATE_LIMIT_PER_MINUTE=1000000", "TENANT_MAX_CONCURRENT_RUNS=100000"))
	return d, nil
}

func (d *deployment) add(name, path string, args, env []string) {
	d.members[name] = &member{name: name, logPath: filepath.Join(d.dir, name+".log"),
		spec: procs.Spec{Name: name, Path: path, Args: args, Env: env}}
	d.order = append(d.order, name)
}

// start starts every process and waits until NATS, the Skill Service and
// the ingress answer.
func (d *deployment) start(ctx context.Context) error {
	for _, b := range d.brokers {
		if err := d.launch(d.members[b.name]); err != nil {
			return err
		}
	}
	for _, b := range d.brokers {
		if err := d.waitBroker(ctx, b, 60*time.Second); err != nil {
			return err
		}
	}
	if err := d.launch(d.members["skills"]); err != nil {
		return err
	}
	if err := waitHTTP(ctx, "http://"+d.skills+"/invocations", 30*time.Second); err != nil {
		return fmt.Errorf("skills: %w", err)
	}
	for _, name := range d.roleNames() {
		if err := d.launch(d.members[name]); err != nil {
			return err
		}
	}
	if err := waitHTTP(ctx, "http://"+d.ingress+"/healthz", 60*time.Second); err != nil {
		return fmt.Errorf("ingress: %w", err)
	}
	return nil
}

// launch starts m's process and watches for an exit the harness did not cause.
func (d *deployment) launch(m *member) error {
	f, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.starts++
	fmt.Fprintf(f, "===== chaos: start #%d of %s at %s =====\n", m.starts, m.name, time.Now().Format(time.RFC3339Nano))
	spec := m.spec
	spec.Output = f
	p, err := procs.Start(spec)
	if err != nil {
		m.mu.Unlock()
		f.Close()
		return err
	}
	m.proc, m.expectExit = p, false
	m.mu.Unlock()
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		<-p.Done()
		f.Close()
		m.mu.Lock()
		unexpected := m.proc == p && !m.expectExit
		m.mu.Unlock()
		select {
		case <-d.closing:
			return
		default:
		}
		if unexpected {
			d.h.crashed(m.name, p.ExitErr(), m.logPath)
			time.Sleep(500 * time.Millisecond)
			select {
			case <-d.closing:
			default:
				if err := d.launch(m); err != nil {
					d.h.problem("restart %s after its crash: %v", m.name, err)
				}
			}
		}
	}()
	return nil
}

// current returns m's running process.
func (m *member) current() *procs.Proc {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc
}

// halt stops m's process with sig (waiting up to grace) and marks the exit
// as caused by the harness.
func (m *member) halt(sig syscall.Signal, grace time.Duration) {
	m.mu.Lock()
	m.expectExit = true
	p := m.proc
	m.mu.Unlock()
	p.Stop(sig, grace)
}

// close stops every process: roles first (SIGTERM lets them drain), then
// the Skill Service and NATS.
func (d *deployment) close() {
	d.closeOne.Do(func() { close(d.closing) })
	var wg sync.WaitGroup
	for _, name := range d.roleNames() {
		m := d.members[name]
		wg.Add(1)
		go func() { defer wg.Done(); m.halt(syscall.SIGTERM, 15*time.Second) }()
	}
	wg.Wait()
	if m := d.members["skills"]; m.current() != nil {
		m.halt(syscall.SIGTERM, 10*time.Second)
	}
	for _, b := range d.brokers {
		if m := d.members[b.name]; m.current() != nil {
			wg.Add(1)
			go func() { defer wg.Done(); m.halt(syscall.SIGTERM, 10*time.Second) }()
		}
	}
	wg.Wait()
	d.wg.Wait()
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > 4*n {
			lines = lines[len(lines)-n:]
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// grep returns up to n lines of the file that contain s.
func grep(path, s string, n int) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() && len(out) < n {
		if strings.Contains(sc.Text(), s) {
			out = append(out, sc.Text())
		}
	}
	return out
}

// freePorts returns n distinct ports free on loopback now: each is held
// until all are picked.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// waitHTTP polls url until it answers 200.
func waitHTTP(ctx context.Context, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	c := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := c.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready within %s: %w", timeout, err)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
