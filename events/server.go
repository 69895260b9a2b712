package events

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// ServerConfig configures an embedded nats-server.
type ServerConfig struct {
	Host       string // default 127.0.0.1
	Port       int    // -1 picks a free port; 0 means the NATS default 4222
	StoreDir   string // JetStream file store; required
	SyncAlways bool   // fsync every write (sync_interval: always)
	ServerName string // default "agentbus"; unique within a cluster
	// Users, when set, are the only accounts that may connect, each with
	// its own permissions; none means an open server (loopback only).
	Users []*server.User
	// Cluster, when set, makes the server one node of a JetStream cluster.
	Cluster *ClusterConfig
	// MonitorAddr, when set, is the host:port of the HTTP monitoring
	// endpoint (/healthz answers 200 once JetStream is current).
	MonitorAddr string
	// Logger, when set, receives the server's own notices, warnings and
	// errors (its debug and trace lines stay off); none keeps it silent.
	Logger server.Logger
}

// ClusterConfig makes an embedded nats-server one node of a JetStream
// cluster: every node names the same cluster, a server name of its own
// and routes to the others' cluster listeners.
type ClusterConfig struct {
	Name   string   // the cluster's name; default "agentbus"
	Listen string   // host:port of this node's cluster listener
	Routes []string // nats-route://host:port (or host:port) of the other nodes; at least one
}

// RunServer starts an embedded nats-server with JetStream and waits until
// it accepts connections. Shut it down with Shutdown and WaitForShutdown.
// A cluster node is ready for connections before its cluster has elected
// a JetStream leader: WaitJetStream waits for that.
func RunServer(cfg ServerConfig) (*server.Server, error) {
	if cfg.StoreDir == "" {
		return nil, errors.New("events: embedded server needs a store dir")
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.ServerName == "" {
		cfg.ServerName = "agentbus"
	}
	opts := &server.Options{
		ServerName: cfg.ServerName,
		Host:       cfg.Host,
		Port:       cfg.Port,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		SyncAlways: cfg.SyncAlways,
		NoSigs:     true,
		NoLog:      true,
		Users:      cfg.Users,
	}
	if cfg.Port == 0 {
		opts.Port = server.DEFAULT_PORT
	}
	if cfg.Cluster != nil {
		if err := clusterOptions(opts, *cfg.Cluster); err != nil {
			return nil, err
		}
	}
	if cfg.MonitorAddr != "" {
		host, port, err := splitHostPort(cfg.MonitorAddr)
		if err != nil {
			return nil, fmt.Errorf("events: monitor address: %w", err)
		}
		opts.HTTPHost, opts.HTTPPort = host, port
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("events: embedded server: %w", err)
	}
	if cfg.Logger != nil {
		s.SetLogger(cfg.Logger, false, false)
	}
	go s.Start()
	// A listener that cannot bind (a cluster port in use) leaves the
	// server not ready.
	if !s.ReadyForConnections(15 * time.Second) {
		s.Shutdown()
		return nil, errors.New("events: embedded server did not become ready (is a port in use?)")
	}
	return s, nil
}

func clusterOptions(opts *server.Options, c ClusterConfig) error {
	if c.Name == "" {
		c.Name = "agentbus"
	}
	host, port, err := splitHostPort(c.Listen)
	if err != nil {
		return fmt.Errorf("events: cluster listen address: %w", err)
	}
	if len(c.Routes) == 0 {
		return errors.New("events: a cluster node needs routes to the other nodes")
	}
	var urls []string
	for _, r := range c.Routes {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		if !strings.Contains(r, "://") {
			r = "nats-route://" + r
		}
		urls = append(urls, r)
	}
	routes := server.RoutesFromStr(strings.Join(urls, ","))
	if len(routes) != len(urls) {
		return fmt.Errorf("events: cluster routes %q: not host:port URLs", c.Routes)
	}
	opts.Cluster = server.ClusterOpts{Name: c.Name, Host: host, Port: port}
	opts.Routes = routes
	return nil
}

// splitHostPort parses host:port; port -1 picks a free one.
func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < -1 || port > 65535 {
		return "", 0, fmt.Errorf("%q: bad port", addr)
	}
	return host, port, nil
}

// WaitJetStream waits until the JetStream API answers on js: at once on a
// single server; on a cluster once its nodes have met and elected a
// metadata leader (until then requests that create a stream go
// unanswered). It gives up when ctx ends.
func WaitJetStream(ctx context.Context, js jetstream.JetStream) error {
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.AccountInfo(actx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("events: JetStream not available: %w", err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
