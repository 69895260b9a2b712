package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/cmd/internal/procs"
)

// natsNode is one `agentbus nats` process of a test cluster.
type natsNode struct {
	name    string
	args    []string
	p       *proc
	url     string // client URL, from its log
	cluster string // cluster listener, from its log
}

// startNATSCluster runs n `agentbus nats` processes as one JetStream
// cluster on loopback. Client ports are the kernel's choice (read from
// the logs); the cluster ports must be known to every node's routes in
// advance, so they are picked free first and the whole cluster starts
// again on new ones if a node cannot bind its port.
func startNATSCluster(t *testing.T, n int) []*natsNode {
	t.Helper()
	bin := binaries(t)
	for attempt := 1; ; attempt++ {
		nodes, err := tryNATSCluster(t, bin, n)
		if err == nil {
			return nodes
		}
		if attempt == 3 {
			t.Fatalf("a %d-node NATS cluster did not start: %v", n, err)
		}
		t.Logf("NATS cluster, attempt %d: %v; again on other ports", attempt, err)
	}
}

func tryNATSCluster(t *testing.T, bin string, n int) ([]*natsNode, error) {
	addrs := make([]string, n)
	for i := range addrs {
		addrs[i] = freeAddr(t)
	}
	nodes := make([]*natsNode, n)
	for i := range nodes {
		var routes []string
		for j, a := range addrs {
			if j != i {
				routes = append(routes, a)
			}
		}
		name := fmt.Sprintf("n%d", i+1)
		nodes[i] = &natsNode{name: name, args: []string{"nats", "--name", name, "--port", "-1", "--store", filepath.Join(t.TempDir(), name),
			"--cluster", addrs[i], "--routes", strings.Join(routes, ","), "--log-level", "debug"}}
		nodes[i].start(t, bin)
	}
	for _, nd := range nodes {
		if err := nd.waitReady(60 * time.Second); err != nil {
			for _, o := range nodes {
				o.p.Kill()
			}
			return nil, err
		}
	}
	return nodes, nil
}

// start runs the node's process with its arguments.
func (nd *natsNode) start(t *testing.T, bin string) {
	t.Helper()
	logs := &procs.Buffer{}
	p, err := procs.Start(procs.Spec{Name: nd.name, Path: filepath.Join(bin, "agentbus"), Args: nd.args, Output: logs})
	if err != nil {
		t.Fatal(err)
	}
	nd.p = &proc{Proc: p, logs: logs}
	t.Cleanup(func() {
		p.Stop(syscall.SIGTERM, 10*time.Second)
		if t.Failed() {
			t.Logf("--- nats %s logs ---\n%s", nd.name, tail(logs.String(), 3000))
		}
	})
}

// waitReady waits for the node's ready line and reads its listeners from
// it; a node that exits first (a port in use) is an error.
func (nd *natsNode) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		for line := range strings.Lines(nd.p.logs.String()) {
			var l struct{ Message, URL, Cluster string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Message == "nats-server ready" && l.URL != "" && l.Cluster != "" {
				nd.url, nd.cluster = l.URL, l.Cluster
				return nil
			}
		}
		if nd.p.Exited() {
			return fmt.Errorf("nats %s exited: %v: %s", nd.name, nd.p.ExitErr(), tail(nd.p.logs.String(), 500))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nats %s not ready within %s", nd.name, timeout)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// clusterURLs is the NATS_URL of a cluster: every node's client URL.
func clusterURLs(nodes []*natsNode) string {
	var urls []string
	for _, nd := range nodes {
		urls = append(urls, nd.url)
	}
	return strings.Join(urls, ",")
}

// connectCluster connects to every node's URL, reconnecting without end,
// and waits until the cluster's JetStream answers.
func connectCluster(t *testing.T, nodes []*natsNode) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(clusterURLs(nodes), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}
