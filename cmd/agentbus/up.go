package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentbus/agentbus/cmd/internal/app"
)

func up(args []string) int {
	fs := flag.NewFlagSet("agentbus up", flag.ExitOnError)
	httpAddr := fs.String("http", app.Env("INGRESS_ADDR", "127.0.0.1:8080"), "ingress listen address (env INGRESS_ADDR)")
	data := fs.String("data", app.Env("AGENTBUS_DATA", "./data"), "data directory: NATS file store and embedded store (env AGENTBUS_DATA)")
	natsPort := fs.Int("nats-port", 4222, "port of the embedded NATS server (-1 picks a free one)")
	skillsAddr := fs.String("skills", "127.0.0.1:7070", "listen address of the demo Skill Service")
	token := fs.String("token", os.Getenv("INGRESS_TOKEN"), "service token; required when --http is beyond loopback (env INGRESS_TOKEN)")
	logLevel := fs.String("log-level", app.Env("LOG_LEVEL", "info"), "log level (env LOG_LEVEL)")
	_ = fs.Parse(args)

	log := app.Logger("agentbus", *logLevel)
	ctx, stop := app.SignalContext()
	defer stop()
	abs, _ := filepath.Abs(*data)
	s, err := app.StartStack(ctx, app.StackConfig{
		DataDir: abs, NATSPort: *natsPort, HTTPAddr: *httpAddr, SkillsAddr: *skillsAddr, Token: *token, Log: log,
		Process: app.Config{Store: app.Env("STORE", "embedded"), StorePrefix: app.Env("STORE_PREFIX", "")},
	})
	if err != nil {
		return app.LogFatal(log, "start", err)
	}
	fmt.Printf("agentbus is up\n  ingress: http://%s (POST /agent/run)\n  nats:    %s\n  skills:  %s\n  data:    %s\nPress Ctrl-C to stop.\n",
		s.IngressAddr, s.Server.ClientURL(), s.SkillsURL, abs)
	<-ctx.Done()
	fmt.Println("stopping: draining consumers…")
	s.Close()
	return 0
}
