package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/skills/demo"
)

func up(args []string) int {
	fs := flag.NewFlagSet("agentbus up", flag.ExitOnError)
	var httpAddr, data string
	var syncAlways bool
	app.EnvIngressAddr.Bind(fs, &httpAddr)
	app.EnvData.Bind(fs, &data)
	natsPort := fs.Int("nats-port", 4222, "port of the embedded NATS server (-1 picks a free one)")
	app.EnvSyncAlways.Bind(fs, &syncAlways)
	demoAddr := fs.String("demo-skills", "127.0.0.1:7070",
		"listen address of the demo Skill Service, served unless SKILL_SERVICE_URL, --skills or SKILL_TRANSPORT=stdio names other skills")
	var ingress app.IngressOptions
	ingress.RegisterAuth(fs)
	ingress.RegisterLimits(fs)
	var pc app.Config
	pc.RegisterStack(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "agentbus up: embedded NATS, store, skills and every role, with the ingress API\n\nFlags:\n")
		fs.PrintDefaults()
	}
	app.ParseFlags(fs, args)
	if err := pc.Validate(); err != nil {
		return app.ReportUsage(os.Stderr, fs.Name(), err)
	}

	log := app.Logger("agentbus", pc.LogLevel)
	ctx, stop := app.SignalContext()
	defer stop()
	abs, _ := filepath.Abs(data)
	s, err := app.StartStack(ctx, app.StackConfig{
		DataDir: abs, NATSPort: *natsPort, SyncAlways: syncAlways, HTTPAddr: httpAddr, SkillsAddr: *demoAddr, Ingress: ingress, Log: log,
		Process: pc, ExternalSkills: externalSkills(fs), Skills: demo.NewService(demo.Config{}).Handler(),
	})
	if err != nil {
		return app.LogFatal(log, "start", err)
	}
	fmt.Printf("agentbus is up\n  ingress: http://%s (POST /agent/run)\n  nats:    %s\n  skills:  %s\n  models:  %s\n  data:    %s\nPress Ctrl-C to stop.\n",
		s.IngressAddr, s.Server.ClientURL(), s.SkillsURL, pc.Models.Summary(), abs)
	<-ctx.Done()
	fmt.Println("stopping: draining consumers…")
	s.Close()
	return 0
}

// externalSkills reports whether the configuration names skills of its
// own (a Skill Service URL or a stdio server) instead of the demo ones.
func externalSkills(fs *flag.FlagSet) bool {
	set := app.EnvSkillServiceURL.IsSet() || app.EnvSkillTransport.Value() == "stdio"
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "skills" || (f.Name == "skill-transport" && f.Value.String() == "stdio") {
			set = true
		}
	})
	return set
}
