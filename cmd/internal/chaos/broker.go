package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentbus/agentbus/cmd/internal/app"
)

// broker is one nats-server process: the only one, or a cluster node.
// It is restarted on the same ports and store.
type broker struct {
	name    string // "nats", or "nats1".."natsN" on a cluster
	port    int    // client port
	cluster int    // cluster port; 0 on a single server
	monitor int    // HTTP monitoring port (/healthz); 0 on a single server
}

// layoutBrokers adds the nats-server processes: one, or cfg.Cluster nodes
// routed to each other, each with its client, cluster and monitoring
// port from ports and its own store.
func (d *deployment) layoutBrokers(ports []int) {
	cfg := d.h.cfg
	n := max(cfg.Cluster, 1)
	for i := range n {
		b := &broker{name: "nats", port: ports[3*i]}
		if n > 1 {
			b.name, b.cluster, b.monitor = fmt.Sprintf("nats%d", i+1), ports[3*i+1], ports[3*i+2]
		}
		d.brokers = append(d.brokers, b)
	}
	var urls []string
	for _, b := range d.brokers {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", b.port))
		args := []string{"nats", "--port", strconv.Itoa(b.port), "--store", filepath.Join(d.dir, b.name+"-store")}
		if cfg.SyncAlways {
			args = append(args, "--sync-always")
		}
		if b.cluster != 0 {
			var routes []string
			for _, o := range d.brokers {
				if o != b {
					routes = append(routes, fmt.Sprintf("127.0.0.1:%d", o.cluster))
				}
			}
			args = append(args, "--name", b.name, "--cluster", fmt.Sprintf("127.0.0.1:%d", b.cluster),
				"--routes", strings.Join(routes, ","), "--monitor", fmt.Sprintf("127.0.0.1:%d", b.monitor))
		}
		d.add(b.name, filepath.Join(d.bin, "agentbus"), args, nil)
	}
	d.natsURL = strings.Join(urls, ",")
}

// waitBroker waits until b accepts connections and, on a cluster, until
// its /healthz says its JetStream is current: caught up with the others,
// so that the next fault may take another node down.
func (d *deployment) waitBroker(ctx context.Context, b *broker, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", b.port), time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not listen within %s: %w", b.name, timeout, err)
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	if b.monitor == 0 {
		return nil
	}
	if err := waitHTTP(ctx, fmt.Sprintf("http://127.0.0.1:%d/healthz", b.monitor), time.Until(deadline)); err != nil {
		return fmt.Errorf("%s is not current: %w", b.name, err)
	}
	return nil
}

// brokerFault takes one broker down for a while (down, drawn by the
// caller): SIGKILL or SIGTERM and a restart on the same ports and store,
// or on a cluster also SIGSTOP and SIGCONT (a node that hangs). It
// returns once the broker is back and current, so two are never down at
// once (the caller holds brokerMu).
func (h *harness) brokerFault(ctx context.Context, rng *rand.Rand, what string, down time.Duration) {
	d := h.d
	b := d.brokers[rng.IntN(len(d.brokers))]
	m := d.members[b.name]
	kinds := []string{"SIGKILL", "SIGTERM"}
	if len(d.brokers) > 1 {
		kinds = append(kinds, "SIGSTOP")
	}
	kind := kinds[rng.IntN(len(kinds))]
	h.logf("%s: %s %s (%d in flight), back after %s", what, kind, b.name, h.inflight.Load(), down.Round(time.Millisecond))
	if kind == "SIGSTOP" {
		p := m.current()
		if err := p.Signal(syscall.SIGSTOP); err != nil {
			return
		}
		_ = sleep(ctx, down)
		_ = p.Signal(syscall.SIGCONT)
	} else {
		sig := syscall.SIGKILL
		if kind == "SIGTERM" {
			sig = syscall.SIGTERM
		}
		m.halt(sig, 10*time.Second)
		_ = sleep(ctx, down)
		if err := d.launch(m); err != nil {
			h.problem("restart %s: %v", b.name, err)
			return
		}
	}
	if err := d.waitBroker(ctx, b, 2*time.Minute); err != nil && ctx.Err() == nil {
		h.problem("%s after the fault: %v", b.name, err)
	}
}

// Broker outage schedule of BrokerOutages "continuous": a broker goes
// down for outageDownMax at most, every outageEveryMin to outageEveryMax.
const (
	outageEveryMin = 5 * time.Second
	outageEveryMax = 40 * time.Second
	outageDownMax  = 2 * time.Second
)

// continuousOutages takes a broker down for 0–2 s every 5–40 s until stop
// is closed.
func (h *harness) continuousOutages(ctx context.Context, stop <-chan struct{}) {
	rng := rand.New(rand.NewPCG(uint64(h.cfg.Seed), 0x6f75746167))
	for n := 1; ; n++ {
		t := time.NewTimer(between(rng, outageEveryMin, outageEveryMax))
		select {
		case <-stop:
			t.Stop()
			return
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		h.mu.Lock()
		h.faults[FaultOutage]++
		h.mu.Unlock()
		h.brokerMu.Lock()
		h.brokerFault(ctx, rng, fmt.Sprintf("broker outage %d", n), between(rng, 0, outageDownMax))
		h.brokerMu.Unlock()
	}
}

// leaderWatch counts JetStream leader elections of the deployment's
// streams and its roles' durable consumers, from the servers' advisories.
type leaderWatch struct {
	n   atomic.Int64
	sub *nats.Subscription
}

// watchLeaders subscribes to the leader-election advisories; a node's
// failure moves the leadership of every stream and consumer it led.
func watchLeaders(nc *nats.Conn) (*leaderWatch, error) {
	durable := map[string]bool{}
	for _, r := range app.Roles {
		durable[r.Consumer().Name] = true
	}
	lw := &leaderWatch{}
	sub, err := nc.Subscribe("$JS.EVENT.ADVISORY.*.LEADER_ELECTED.>", func(m *nats.Msg) {
		tok := strings.Split(m.Subject, ".")
		switch {
		case len(tok) == 6 && tok[3] == "STREAM":
			lw.n.Add(1)
		case len(tok) == 7 && tok[3] == "CONSUMER" && durable[tok[6]]:
			lw.n.Add(1)
		}
	})
	if err != nil {
		return nil, err
	}
	lw.sub = sub
	return lw, nil
}

// count returns the elections seen so far.
func (lw *leaderWatch) count() int { return int(lw.n.Load()) }
