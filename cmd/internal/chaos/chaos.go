package chaos

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// DemoTask is the task every chaos run submits.
const DemoTask = "List the active outlets and rank them by engagement"

// Tenant is the tenant of every chaos run.
const Tenant = "demo"

// Fault kinds.
const (
	FaultKill = "kill"    // kill -9 a role process, restart it after a short delay
	FaultNATS = "nats"    // stop nats-server (SIGTERM or SIGKILL), restart it on the same port and store
	FaultStop = "sigstop" // SIGSTOP an executor for longer than the ack wait, then SIGCONT
	// FaultOutage is a broker outage of BrokerOutages "continuous": a
	// nats-server (a cluster node) down for 0–2 s every 5–40 s.
	FaultOutage = "outage"
)

// FaultKinds are the kinds of fault the harness schedules, in report order.
var FaultKinds = []string{FaultKill, FaultNATS, FaultStop}

// OutagesContinuous is the BrokerOutages mode that takes a broker down
// for 0–2 s every 5–40 s for the whole run.
const OutagesContinuous = "continuous"

// Config configures a chaos run. Zero values take defaults.
type Config struct {
	// BinDir holds the agentbus command and the five role binaries. Empty:
	// they are built (go build) into a temporary directory.
	BinDir string
	// Runs is the number of runs submitted under faults; default 500.
	Runs int
	// Seed seeds the fault schedule and the choice of targets; default
	// the current time.
	Seed int64
	// Concurrency is the number of runs in flight at once; default 8.
	Concurrency int
	// Faults is the number of faults injected while runs are submitted,
	// split evenly across FaultKinds; default max(6, Runs/5).
	Faults int
	// HTTPEvery sends every HTTPEvery-th run through the ingress's
	// POST /agent/run; the others are published on NATS as
	// agent.run.requested.<tenant> with a harness-chosen run id. Default
	// 3; negative sends every run over NATS.
	HTTPEvery int
	// HTTPTimeout bounds one POST /agent/run; default 30s.
	HTTPTimeout time.Duration
	// Executors is the number of executor processes; default 2.
	Executors int
	// AckWait is the role consumers' ack wait; default 2s, so a SIGSTOPped
	// executor's messages are redelivered quickly.
	AckWait time.Duration
	// MaxDeliver is the role consumers' max deliveries; default 20.
	MaxDeliver int
	// RunWait is how long one submission slot waits for its run to finish
	// before moving on (the run is still checked at the end); default 60s.
	RunWait time.Duration
	// Settle bounds the wait for unfinished runs after the last fault;
	// default 2m.
	Settle time.Duration
	// SkillLatency is slept in every skill call of the demo Skill Service,
	// so runs last long enough for faults to strike mid-run and mid-call;
	// default 200ms (negative: none).
	SkillLatency time.Duration
	// NATSDown bounds how long nats-server stays down in a NATS fault
	// (drawn between 1s and NATSDown); default 4s.
	NATSDown time.Duration
	// SyncAlways runs nats-server with --sync-always.
	SyncAlways bool
	// Cluster is the number of nats-server processes: 0 or 1 runs one;
	// 3 runs a JetStream cluster on loopback, every stream and bucket
	// replicated three times, and a NATS fault takes one node down
	// (SIGKILL, SIGTERM or SIGSTOP), never two at once.
	Cluster int
	// BrokerOutages "continuous" takes a broker down for 0–2 s every
	// 5–40 s for as long as runs are submitted, besides the scheduled
	// faults; these then default to none, and never include NATS faults.
	BrokerOutages string
	// WorkDir receives the process logs and the NATS store. Empty: a new
	// temporary directory, removed after a passing run.
	WorkDir string
	// Out receives progress lines, the summary and, on failure, log tails;
	// default os.Stdout.
	Out io.Writer
	// Quiet leaves out the per-fault progress lines.
	Quiet bool
	// ProjectionChecks is how many finished runs have their plan
	// projection and trace read back, spread evenly over the run; default
	// every run up to 1,000 runs, 100 beyond (each trace read scans the
	// tenant's stored events, so a long run cannot read all of them back).
	ProjectionChecks int
}

func (c *Config) defaults() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Runs, 500)
	if c.Runs > 1000 {
		def(&c.ProjectionChecks, 100)
	}
	def(&c.Concurrency, 8)
	if c.BrokerOutages != OutagesContinuous {
		def(&c.Faults, max(6, c.Runs/5))
	}
	def(&c.HTTPEvery, 3)
	def(&c.Executors, 2)
	def(&c.MaxDeliver, 20)
	defd := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	defd(&c.HTTPTimeout, 30*time.Second)
	defd(&c.AckWait, 2*time.Second)
	defd(&c.RunWait, 60*time.Second)
	defd(&c.Settle, 2*time.Minute)
	defd(&c.SkillLatency, 200*time.Millisecond)
	defd(&c.NATSDown, 4*time.Second)
	c.NATSDown = max(c.NATSDown, time.Second)
	c.SkillLatency = max(c.SkillLatency, 0)
	if c.Seed == 0 {
		c.Seed = time.Now().UnixNano()
	}
	if c.Out == nil {
		c.Out = os.Stdout
	}
	if c.Faults < 0 {
		c.Faults = 0
	}
}

// Summary is the outcome of a chaos run.
type Summary struct {
	Runs int
	// Lost counts runs without a run.finished in the AGENT stream.
	Lost int
	// DuplicateEffects counts idempotency keys the Skill Service executed
	// more than once.
	DuplicateEffects int
	// Mismatched counts runs whose answer differs from the reference
	// answer, or that ended with a code other than SUCCESS.
	Mismatched int
	// MultiFinished counts run ids with more than one run.finished.
	MultiFinished int
	// StaleProjections counts successful runs whose plan projection (GET
	// /agent/plans/{id}) is not complete.
	StaleProjections int
	// ProjectionsChecked counts the runs whose plan projection and
	// trace were read back (Config.ProjectionChecks).
	ProjectionsChecked int
	// TraceGaps counts successful runs whose audit trace (GET
	// /agent/plans/{id}/trace) differs from the reference run's in the
	// number of events of some type.
	TraceGaps int
	// Faults counts the injected faults by kind.
	Faults map[string]int
	// LeaderChanges counts the JetStream leader elections of the streams
	// and the roles' consumers seen during the faults (advisories).
	LeaderChanges int
	// Crashes counts role processes that exited without being killed
	// (the harness restarts them, as a supervisor would).
	Crashes int
	// DeadLetters counts agent.dead.<tenant> messages.
	DeadLetters int
	// Executions and Replays total the Skill Service's report.
	Executions, Replays int
	// HTTPRuns went through the ingress; HTTPRetries counts POSTs repeated
	// after an ambiguous failure; HTTPStalls counts POSTs that timed out
	// although their run finished; Resubmitted counts extra run ids a
	// retried POST created.
	HTTPRuns, HTTPRetries, HTTPStalls, Resubmitted int
	Seed                                           int64
	Duration                                       time.Duration
	WorkDir                                        string
	// Problems describes the first failures found.
	Problems []string
}

// TotalFaults is the number of injected faults.
func (s Summary) TotalFaults() int {
	n := 0
	for _, v := range s.Faults {
		n += v
	}
	return n
}

// OK reports whether no run was lost, duplicated, mismatched or finished
// twice, every finished run's plan projection and trace are whole, and no
// process exited without being killed.
func (s Summary) OK() bool {
	return s.Lost == 0 && s.DuplicateEffects == 0 && s.Mismatched == 0 && s.MultiFinished == 0 &&
		s.StaleProjections == 0 && s.TraceGaps == 0 && s.Crashes == 0
}

// Line is the one-line summary: runs=N lost=0 duplicate_effects=0
// mismatched=0 and more fields.
func (s Summary) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "runs=%d lost=%d duplicate_effects=%d mismatched=%d multi_finished=%d stale_projections=%d trace_gaps=%d projections_checked=%d faults=%d",
		s.Runs, s.Lost, s.DuplicateEffects, s.Mismatched, s.MultiFinished, s.StaleProjections, s.TraceGaps, s.ProjectionsChecked, s.TotalFaults())
	for _, k := range append(FaultKinds, FaultOutage) {
		fmt.Fprintf(&b, " %s=%d", k, s.Faults[k])
	}
	fmt.Fprintf(&b, " leader_changes=%d", s.LeaderChanges)
	fmt.Fprintf(&b, " crashes=%d dead_letters=%d executions=%d replays=%d http_runs=%d http_retries=%d http_stalls=%d resubmitted=%d seed=%d duration=%s",
		s.Crashes, s.DeadLetters, s.Executions, s.Replays, s.HTTPRuns, s.HTTPRetries, s.HTTPStalls, s.Resubmitted,
		s.Seed, s.Duration.Round(100*time.Millisecond))
	return b.String()
}
