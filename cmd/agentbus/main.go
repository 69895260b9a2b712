package main

import (
	"os"

	"github.com/agentbus/agentbus/cmd/internal/app"
)

const usage = `agentbus: event-driven agent orchestration on NATS JetStream

Usage:
  agentbus up   [--http 127.0.0.1:8080] [--data ./data] [--sync-always]  run everything in one process
  agentbus demo [--task "..."]                            run the demo task end to end and exit
  agentbus run  [--url http://127.0.0.1:8080] "<task>"    submit a task to a running agentbus up
  agentbus cancel [--tenant demo] <run_id>                cancel a run: it ends USER_CANCEL before its next hop
  agentbus approve [--deny] [--content JSON | --answer TEXT | --extend dim=N,...] <run_id> <gate_id>
                                                           decide a gate the run waits at (answer its question, extend its
                                                           budget), then follow the run
  agentbus interrupt|resume <run_id>                       park a run at its next hop, or resume it
  agentbus steer <run_id> "<message>"                      add a message every later turn of the run sees
  agentbus memory add|query [--user ID] "<text>"          remember a fact later runs recall, or search what they would
  agentbus replay <run_id> | --all [--since 24h]          re-derive recorded runs' decisions (no model, no tool); exit 1 on divergence
  agentbus agent|skill list|get|create|update|delete [--tenant demo] [id] [JSON | --file F]
                                                           the tenant's agent and skill definitions (/agent/agents, /agent/skills)
  agentbus skills [--addr 127.0.0.1:7070]                 serve the demo Skill Service alone
  agentbus nats [--port 4222] [--store DIR] [--sync-always]  run nats-server with JetStream alone
         [--name n1 --cluster HOST:PORT --routes HOST:PORT,...]  ... or as one node of a JetStream cluster
  agentbus tenants create|list|rotate|revoke [--nats URL]  manage tenant API keys (abk_…)
  agentbus gates [--tenant T --set MODES | --reset]        show or change which calls wait at a gate (default: network, delegated)
  agentbus policy [--tenant T --set NAME=CHOICE | --reset NAME]  show or change taint, injection and payload record choices
  agentbus setup [--nats URL] [--replicas 3]               set the topology up as admin on a server agentbus does not run
  agentbus mcp-conformance-client <server-url>            the client the MCP conformance suite runs (deploy/mcp/conformance)

Run "agentbus <command> --help" for the flags of a command. The benchmark and the
fault-injection harness are in agentbus-dev (make bench, make chaos).
`

func main() {
	cmds := map[string]func([]string) int{"up": up, "demo": runDemo, "run": run, "cancel": cancelRun,
		"approve": control("approve"), "interrupt": control("interrupt"), "resume": control("resume"), "steer": control("steer"),
		"memory": memoryCmd, "replay": replay, "skills": serveSkills, "nats": serveNATS, "tenants": tenants, "gates": gates, "policy": policy,
		"setup": setup, "mcp-conformance-client": conformanceClient, "agent": defsCmd("agent"), "skill": defsCmd("skill")}
	os.Exit(app.RunCommand("agentbus", usage, os.Args[1:], cmds, os.Stdout, os.Stderr))
}
