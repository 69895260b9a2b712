package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/events"
)

// natsFlags are the flags of agentbus nats.
type natsFlags struct {
	host, store, logLevel, usersFile string
	port                             int
	syncAlways, perms                bool
	name, cluster, clusterName       string
	routes, monitor                  string
}

func (f *natsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.host, "host", "127.0.0.1", "listen host")
	fs.IntVar(&f.port, "port", 4222, "client port (-1 picks a free one)")
	fs.StringVar(&f.store, "store", app.EnvData.Value()+"/nats", "JetStream file store directory (one per node) (env AGENTBUS_DATA, + /nats)")
	fs.BoolVar(&f.syncAlways, "sync-always", false, "fsync every write (survives a machine crash, not only a process crash)")
	app.EnvLogLevel.Bind(fs, &f.logLevel)
	app.EnvNATSPermissions.Bind(fs, &f.perms)
	fs.StringVar(&f.usersFile, "users-file", "", "the users' passwords, created (mode 0600) when missing; default <store>/users.json (every node of a cluster needs the same file)")
	app.EnvNATSServerName.Bind(fs, &f.name)
	app.EnvNATSCluster.Bind(fs, &f.cluster)
	app.EnvNATSClusterName.Bind(fs, &f.clusterName)
	app.EnvNATSRoutes.Bind(fs, &f.routes)
	app.EnvNATSMonitor.Bind(fs, &f.monitor)
}

// serverConfig is the embedded server's configuration from the flags.
func (f *natsFlags) serverConfig(dir string) (events.ServerConfig, error) {
	sc := events.ServerConfig{Host: f.host, Port: f.port, StoreDir: dir, SyncAlways: f.syncAlways,
		ServerName: f.name, MonitorAddr: f.monitor}
	if f.cluster == "" {
		if f.routes != "" {
			return sc, errors.New("--routes needs --cluster")
		}
		return sc, nil
	}
	if f.name == "" {
		return sc, errors.New("--cluster needs --name, unique within the cluster")
	}
	var routes []string
	for r := range strings.SplitSeq(f.routes, ",") {
		if r = strings.TrimSpace(r); r != "" {
			routes = append(routes, r)
		}
	}
	if len(routes) == 0 {
		return sc, errors.New("--cluster needs --routes to the other nodes")
	}
	sc.Cluster = &events.ClusterConfig{Name: f.clusterName, Listen: f.cluster, Routes: routes}
	return sc, nil
}

// serveNATS runs a standalone nats-server with JetStream, for deployments
// (and the chaos harness) where NATS is its own OS process that can be
// stopped and restarted on the same port and store; with --cluster, as
// one node of a JetStream cluster.
func serveNATS(args []string) int {
	var f natsFlags
	fs := flag.NewFlagSet("agentbus nats", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `agentbus nats: run nats-server with JetStream alone, or as one node of a cluster

Usage: agentbus nats [flags]

A 3-node cluster on one machine (each node its own store; clients take every node's URL,
NATS_URL=nats://127.0.0.1:4222,nats://127.0.0.1:4223,nats://127.0.0.1:4224, and replicate
every stream and bucket 3 times unless REPLICAS says otherwise):

  agentbus nats --name n1 --port 4222 --store data/n1 --cluster 127.0.0.1:6222 --routes 127.0.0.1:6223,127.0.0.1:6224
  agentbus nats --name n2 --port 4223 --store data/n2 --cluster 127.0.0.1:6223 --routes 127.0.0.1:6222,127.0.0.1:6224
  agentbus nats --name n3 --port 4224 --store data/n3 --cluster 127.0.0.1:6224 --routes 127.0.0.1:6222,127.0.0.1:6223

Flags:
`)
		fs.PrintDefaults()
	}
	f.register(fs)
	app.ParseFlags(fs, args)
	log := app.Logger("nats", f.logLevel)
	dir, err := filepath.Abs(f.store)
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return app.LogFatal(log, "store dir", err)
	}
	ctx, stop := app.SignalContext()
	defer stop()
	sc, err := f.serverConfig(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentbus nats:", err)
		return 2
	}
	sc.Logger = app.ServerLogger(log)
	var passwords map[string]string
	if f.perms {
		if f.usersFile == "" {
			f.usersFile = filepath.Join(dir, "users.json")
		}
		if passwords, err = app.LoadPasswords(f.usersFile); err == nil {
			sc.Users, err = app.ServerUsers(passwords, "")
		}
		if err != nil {
			return app.LogFatal(log, "users", err)
		}
	}
	ns, err := events.RunServer(sc)
	if err != nil {
		return app.LogFatal(log, "start", err)
	}
	logReady(log, ns, dir, f.syncAlways)
	if f.perms {
		if err := setupTopology(ctx, ns.ClientURL(), passwords[app.UserAdmin], log); err != nil {
			ns.Shutdown()
			return app.LogFatal(log, "set up the topology", err)
		}
		fmt.Printf("per-role permissions: run each process with NATS_USER=<role> and NATS_PASSWORD from %s\n", f.usersFile)
	}
	<-ctx.Done()
	log.Info().Msg("shutting down")
	ns.Shutdown()
	ns.WaitForShutdown()
	return 0
}

// logReady logs the listeners of a started server: its client URL and,
// on a cluster node, its cluster address (the harnesses read both).
func logReady(log zerolog.Logger, ns *server.Server, dir string, syncAlways bool) {
	ev := log.Info().Str("url", ns.ClientURL()).Str("server_name", ns.Name()).Str("store", dir).Bool("sync_always", syncAlways)
	if a := ns.ClusterAddr(); a != nil {
		ev = ev.Str("cluster", a.String()).Str("cluster_name", ns.ClusterName())
	}
	if a := ns.MonitorAddr(); a != nil {
		ev = ev.Str("monitor", a.String())
	}
	ev.Msg("nats-server ready")
	if a := ns.ClusterAddr(); a != nil {
		fmt.Printf("nats-server %s with JetStream on %s, cluster %s on %s (store %s)\n", ns.Name(), ns.ClientURL(), ns.ClusterName(), a, dir)
		return
	}
	fmt.Printf("nats-server with JetStream on %s (store %s)\n", ns.ClientURL(), dir)
}

// setupTopology sets up the streams, consumers and buckets as the
// administrator, so the role users, who may not, find them in place. On a
// cluster it waits for the nodes to meet and elect their leaders.
func setupTopology(ctx context.Context, url, password string, log zerolog.Logger) error {
	nc, err := nats.Connect(url, nats.Name("agentbus-setup"), nats.UserInfo(app.UserAdmin, password))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		err = events.WaitJetStream(ctx, js)
		if err == nil {
			err = app.Setup(ctx, js, app.DefaultConfig())
		}
		if err == nil || ctx.Err() != nil {
			return err
		}
		log.Warn().Err(err).Msg("set up the topology: retrying")
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}
