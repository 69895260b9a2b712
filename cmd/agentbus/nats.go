package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/events"
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
	ns, err := events.RunServer(events.ServerConfig{Host: *host, Port: *port, StoreDir: dir, SyncAlways: *syncAlways})
	if err != nil {
		return app.LogFatal(log, "start", err)
	}
	log.Info().Str("url", ns.ClientURL()).Str("store", dir).Bool("sync_always", *syncAlways).Msg("nats-server ready")
	fmt.Printf("nats-server with JetStream on %s (store %s)\n", ns.ClientURL(), dir)
	<-ctx.Done()
	log.Info().Msg("shutting down")
	ns.Shutdown()
	ns.WaitForShutdown()
	return 0
}
