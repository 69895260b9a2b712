package main

import (
	"os"

	"github.com/agentbus/agentbus/cmd/internal/app"
)

const usage = `agentbus-dev: the benchmark and the fault-injection harness of agentbus

Usage:
  agentbus-dev bench [--quick] [--skip-peer] [--skip-scaling]  measure agentbus beside the JetStream floor, LangGraph,
                                                               Restate and with 1, 2, 4 executor processes
  agentbus-dev syncprobe [--streams 1,2,4,8,16]                 synced publishes a second (sync_interval: always) as
                                                               publishers spread over more streams
  agentbus-dev chaos [--runs 500] [--seed N] [--concurrency 8]  fault-injection run against the multi-process deployment
         [--cluster 3] [--broker-outages continuous]          ... on a 3-node cluster; with a broker down every 5–40 s

Run "agentbus-dev <command> --help" for the flags of a command.
`

func main() {
	cmds := map[string]func([]string) int{"bench": runBench, "syncprobe": runSyncProbe, "chaos": runChaos}
	os.Exit(app.RunCommand("agentbus-dev", usage, os.Args[1:], cmds, os.Stdout, os.Stderr))
}
