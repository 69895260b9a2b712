package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"time"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/skills/demo"
)

// serveSkills runs the demo Skill Service on its own, for deployments
// where every role is a separate process.
func serveSkills(args []string) int {
	fs := flag.NewFlagSet("agentbus skills", flag.ExitOnError)
	var addr string
	app.EnvSkillsAddr.Bind(fs, &addr)
	latency := fs.Duration("latency", 0, "sleep this long in every skill call (fault-injection tests)")
	app.ParseFlags(fs, args)
	log := app.Logger("skills", "info")
	ctx, stop := app.SignalContext()
	defer stop()
	svc := demo.NewService(demo.Config{Latency: *latency})
	srv := &http.Server{Addr: addr, Handler: svc.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	fmt.Printf("demo Skill Service on http://%s/tenants/{tenant}/mcp\n", addr)
	select {
	case err := <-errc:
		return app.LogFatal(log, "serve", err)
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(shut)
	return 0
}
