package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/skills/demo"
	"github.com/agentbus/agentbus/store"
)

// demoTenant is the tenant the demo's runs belong to.
const demoTenant = "demo"

// DemoTask is the task `agentbus demo` runs.
const DemoTask = "List the active outlets and rank them by engagement"

func runDemo(args []string) int {
	fs := flag.NewFlagSet("agentbus demo", flag.ExitOnError)
	task := fs.String("task", DemoTask, "the task to run")
	data := fs.String("data", "", "data directory (default: a temporary one, removed on exit)")
	logLevel := fs.String("log-level", app.EnvLogLevel.Or("warn"), "log level of the embedded processes (env LOG_LEVEL)")
	allow := fs.String("allow", "", "approval modes the demo tenant's calls make without a gate, comma-separated (network, delegated); "+
		"by default they wait for an approval, as destructive calls always do")
	var pc app.Config
	pc.Models.Register(fs)
	app.ParseFlags(fs, args)
	if err := pc.Models.Validate(); err != nil {
		return app.ReportUsage(os.Stderr, fs.Name(), err)
	}
	gated, err := gatedWithout(*allow)
	if err != nil {
		return app.ReportUsage(os.Stderr, fs.Name(), err)
	}

	dir := *data
	if dir == "" {
		tmp, err := os.MkdirTemp("", "agentbus-demo-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	log := app.Logger("agentbus", *logLevel)
	ctx, stop := app.SignalContext()
	defer stop()
	fmt.Println("agentbus demo: starting embedded NATS, store, demo skills and every role…")
	s, err := app.StartStack(ctx, app.StackConfig{DataDir: dir, NATSPort: -1, HTTPAddr: "127.0.0.1:0", Log: log, Process: pc,
		Skills: demo.NewService(demo.Config{}).Handler()})
	if err != nil {
		return app.LogFatal(log, "start", err)
	}
	defer s.Close()
	if err := demoGates(ctx, s, gated, *allow != ""); err != nil {
		return app.LogFatal(log, "approval gates", err)
	}
	fmt.Printf("task: %q\n\n", *task)
	start := time.Now()
	p := &printer{progress: printProgress}
	res, err := runclient.NewHTTP("http://"+s.IngressAddr, nil).Stream(ctx, orch.RunRequest{
		TenantID: demoTenant, UserID: "demo-user", SessionID: fmt.Sprintf("sess-%d", time.Now().UnixNano()), Message: *task,
	}, p.chunk)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	if !p.answered {
		fmt.Printf("\nanswer:\n%s\n", res.Response)
	}
	printPlan(ctx, s, res.TenantID, res.PlanID)
	fmt.Printf("\n%s, %s in %s; %s\n", res.Status, res.TerminalCode, time.Since(start).Round(time.Millisecond), usageLine(res.Usage))
	if res.TerminalCode != orch.CodeSuccess {
		return 1
	}
	return 0
}

// gatedWithout is the default gated approval modes less those allow
// names, comma-separated.
func gatedWithout(allow string) ([]string, error) {
	gated := slices.Clone(runctl.DefaultGatedModes)
	for _, m := range modeList(allow) {
		switch {
		case !slices.Contains(runctl.DefaultGatedModes, m):
			return nil, fmt.Errorf("--allow: %q is not one of %v (a destructive call always waits for an approval)", m, runctl.DefaultGatedModes)
		default:
			gated = slices.DeleteFunc(gated, func(g string) bool { return g == m })
		}
	}
	return gated, nil
}

// demoGates stores gated as the demo tenant's gated approval modes when
// set, and says which they are.
func demoGates(ctx context.Context, s *app.Stack, gated []string, set bool) error {
	if set {
		kv, err := s.Deps.JS.KeyValue(ctx, handlers.BucketConfig)
		if err != nil {
			return err
		}
		if _, err := runctl.SetGatedModes(ctx, kv, demoTenant, gated, false); err != nil {
			return err
		}
	}
	fmt.Printf("approval gates: the %s tenant's %s calls wait for an approval", demoTenant, strings.Join(append(slices.Clone(gated), skills.ModeDestructive), ", "))
	if len(gated) > 0 {
		fmt.Printf(" (--allow %s runs them without one)", strings.Join(gated, ","))
	}
	fmt.Println()
	return nil
}

// printProgress prints a step's progress as it happens.
func printProgress(c runclient.Chunk) {
	line, _ := runclient.Describe(c)
	if !strings.HasPrefix(line, "routed:") && !strings.HasPrefix(line, "plan received:") {
		line = "  " + line
	}
	fmt.Println(line)
}

// printPlan prints the persisted plan's steps once the projector has
// written the run's final projection.
func printPlan(ctx context.Context, s *app.Stack, tenantID, planID string) {
	var (
		p       store.Plan
		version int64
		err     error
	)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		p, version, err = s.Deps.Store.GetPlan(ctx, tenantID, planID)
		if err == nil && store.PlanFinished(p.Status) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		fmt.Println("plan not readable:", err)
		return
	}
	fmt.Printf("\nplan %s (%s, version %d, replans %d):\n", p.PlanID, p.Status, version, p.ReplanCount)
	for _, st := range p.Steps {
		var rs struct {
			Shape struct {
				Properties map[string]any `json:"properties"`
			} `json:"shape"`
		}
		_ = json.Unmarshal(st.ReturnSpec, &rs)
		var fields []string
		for k := range rs.Shape.Properties {
			fields = append(fields, k)
		}
		fmt.Printf("  step %d [%s] %s\n         skills %v → return_spec %v, memory %s\n", st.StepIndex, st.Status, st.Task, st.Skills, fields, st.MemoryKey)
	}
}
