package main

import (
	"flag"
	"os"
	"time"

	"github.com/agentbus/agentbus/cmd/internal/app"
)

func main() {
	var opts app.IngressOptions
	c := app.Parse("ingress", "the agentbus HTTP API", os.Args[1:], func(fs *flag.FlagSet) {
		app.EnvIngressAddr.Bind(fs, &opts.Addr)
		opts.RegisterAuth(fs)
		opts.RegisterLimits(fs)
		fs.DurationVar(&opts.RunTimeout, "run-timeout", 5*time.Minute, "how long POST /agent/run waits for an answer")
	})
	log := app.Logger("ingress", c.LogLevel)
	ctx, stop := app.SignalContext()
	defer stop()
	d, err := app.Connect(ctx, "ingress", c, log)
	if err != nil {
		os.Exit(app.LogFatal(log, "start", err))
	}
	defer d.Close()
	if err := app.ServeIngress(ctx, d, opts, nil); err != nil {
		os.Exit(app.LogFatal(log, "serve", err))
	}
}
