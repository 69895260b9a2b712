package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// serveNATS runs a standalone nats-server with JetStream, for deployments
// (and the chaos harness) where NATS is its own OS process that can be
// stopped and restarted on the same port and store.
func serveNATS(args []string) int {
	fs := flag.NewFlagSet("agentbus nats", flag.ExitOnError)
	host := fs.String("host", "127.0.0.1", "listen host")
	port := fs.Int("port", 4222, "client port (-1 picks a free one)")
	store := fs.String("store", app.Env("AGENTBUS_DATA", "./data")+"/nats", "JetStream file store directory")
	syncAlways := fs.Bool("sync-always", false, "fsync every write (survives a machine crash, not only a process crash)")
	logLevel := fs.String("log-level", app.Env("LOG_LEVEL", "info"), "log level (env LOG_LEVEL)")
	perms := fs.Bool("permissions", app.Env("NATS_PERMISSIONS", "") == "1",
		"one NATS user per role process (router, planner, executor, aggregator with the projector), the ingress and admin, each allowed only its own subjects; "+
			"passwords in --users-file, the topology set up by admin (env NATS_PERMISSIONS=1)")
	usersFile := fs.String("users-file", "", "the users' passwords, created (mode 0600) when missing; default <store>/users.json")
	_ = fs.Parse(args)
	log := app.Logger("nats", *logLevel)
	dir, err := filepath.Abs(*store)
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return app.LogFatal(log, "store dir", err)
	}
	ctx, stop := app.SignalContext()
	defer stop()
	sc := events.ServerConfig{Host: *host, Port: *port, StoreDir: dir, SyncAlways: *syncAlways}
	var passwords map[string]string
	if *perms {
		if *usersFile == "" {
			*usersFile = filepath.Join(dir, "users.json")
		}
		if passwords, err = app.LoadPasswords(*usersFile); err == nil {
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
	if *perms {
		if err := setupTopology(ctx, ns.ClientURL(), passwords[app.UserAdmin]); err != nil {
			ns.Shutdown()
			return app.LogFatal(log, "set up the topology", err)
		}
		fmt.Printf("per-role permissions: run each process with NATS_USER=<role> and NATS_PASSWORD from %s\n", *usersFile)
	}
	log.Info().Str("url", ns.ClientURL()).Str("store", dir).Bool("sync_always", *syncAlways).Msg("nats-server ready")
	fmt.Printf("nats-server with JetStream on %s (store %s)\n", ns.ClientURL(), dir)
	<-ctx.Done()
	log.Info().Msg("shutting down")
	ns.Shutdown()
	ns.WaitForShutdown()
	return 0
}

// setupTopology sets up the streams, consumers and buckets as the
// administrator, so the role users, who may not, find them in place.
func setupTopology(ctx context.Context, url, password string) error {
	nc, err := nats.Connect(url, nats.Name("agentbus-setup"), nats.UserInfo(app.UserAdmin, password))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return app.Setup(ctx, js, app.DefaultConfig())
}
