package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/cmd/internal/chaos"
)

// runChaos runs the fault-injection harness against the multi-process
// deployment and exits non-zero unless every run finished once with the
// reference answer and no skill side effect happened twice.
func runChaos(args []string) int {
	var c chaos.Config
	fs := flag.NewFlagSet("agentbus-dev chaos", flag.ExitOnError)
	fs.IntVar(&c.Runs, "runs", 500, "runs to submit under faults")
	fs.Int64Var(&c.Seed, "seed", 0, "seed of the fault schedule (default: the current time)")
	fs.IntVar(&c.Concurrency, "concurrency", 8, "runs in flight at once")
	fs.IntVar(&c.Faults, "faults", 0, "faults to inject, split across kill -9, nats restart and SIGSTOP (default max(6, runs/5); none with --broker-outages)")
	fs.IntVar(&c.HTTPEvery, "http-every", 3, "every n-th run goes through POST /agent/run, the others are published on NATS (-1: none)")
	fs.IntVar(&c.Executors, "executors", 2, "executor processes")
	fs.DurationVar(&c.AckWait, "ack-wait", 0, "ack wait of the role consumers (default 2s)")
	fs.IntVar(&c.MaxDeliver, "max-deliver", 0, "max deliveries of the role consumers (default 20)")
	fs.DurationVar(&c.Settle, "settle", 0, "how long to wait for unfinished runs after the last fault (default 2m)")
	fs.DurationVar(&c.SkillLatency, "skill-latency", 0, "latency of every demo skill call, so faults strike mid-run (default 200ms; negative: none)")
	fs.DurationVar(&c.NATSDown, "nats-down", 0, "longest nats-server outage of a NATS fault (default 4s)")
	fs.BoolVar(&c.SyncAlways, "sync-always", false, "run nats-server with --sync-always")
	fs.IntVar(&c.Cluster, "cluster", 0, "run a JetStream cluster of this many nats-server nodes (3) on loopback, streams and buckets on 3 replicas; "+
		"a NATS fault then kills, stops or freezes one node, never two at once")
	fs.StringVar(&c.BrokerOutages, "broker-outages", "", `"continuous": take a broker down for 0–2 s every 5–40 s for the whole run; `+
		"the scheduled faults then default to none (--faults adds role kills and SIGSTOPs)")
	fs.StringVar(&c.BinDir, "bin", "", "directory with agentbus and the role binaries (default: build them)")
	fs.StringVar(&c.WorkDir, "dir", "", "directory for process logs and the NATS store (default: a temporary one, removed if the run passes)")
	fs.IntVar(&c.ProjectionChecks, "projection-checks", 0, "finished runs whose plan projection and trace are read back, spread over the run (default all up to 1000 runs, else 100)")
	fs.BoolVar(&c.Quiet, "quiet", false, "print only the summary (and log tails on failure)")
	app.ParseFlags(fs, args)
	ctx, stop := app.SignalContext()
	defer stop()
	sum, err := chaos.Run(ctx, c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentbus-dev chaos:", err)
		if sum.WorkDir != "" {
			fmt.Fprintln(os.Stderr, "process logs:", sum.WorkDir)
		}
		return 1
	}
	if !sum.OK() {
		return 1
	}
	return 0
}
