package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/runctl"
)

// replay re-derives recorded runs' decisions from the AGENT stream,
// without calling a model or a tool, and reports any divergence.
func replay(args []string) int {
	fs := flag.NewFlagSet("agentbus replay", flag.ExitOnError)
	var natsURL string
	app.EnvNATSURL.Bind(fs, &natsURL)
	tenant := fs.String("tenant", "", "only this tenant's runs (default every tenant)")
	all := fs.Bool("all", false, "replay every run recorded since --since")
	since := fs.Duration("since", 24*time.Hour, "with --all: how far back to read the AGENT stream")
	asJSON := fs.Bool("json", false, "print each run's report as JSON")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: agentbus replay [flags] <run_id>\n       agentbus replay --all [--since 24h] [flags]\n\n"+
			"Folds the run decider over each run's recorded messages (AGENT stream) and controls (the gates and cancels\n"+
			"buckets), re-derives every decision and checks it against what was recorded. No model or tool is called.\n"+
			"Exits 1 if any run diverges. NATS_USER/NATS_PASSWORD log in to a server with per-role permissions (admin).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	app.ParseFlags(fs, args)
	if *all == (fs.NArg() == 1) {
		fs.Usage()
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	opts := []nats.Option{nats.Name("agentbus-replay"), nats.Timeout(5 * time.Second)}
	if user := app.EnvNATSUser.Value(); user != "" {
		opts = append(opts, nats.UserInfo(user, app.EnvNATSPassword.Value()))
	}
	nc, err := nats.Connect(natsURL, opts...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "agentbus replay: connect to NATS at %s: %v\n", natsURL, err)
		return 1
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentbus replay:", err)
		return 1
	}
	start := time.Now().Add(-*since)
	if !*all {
		start = time.Now().Add(-7 * 24 * time.Hour) // the AGENT stream's retention
	}
	runs, err := recordedRuns(ctx, js, *tenant, start, fs.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentbus replay:", err)
		return 1
	}
	if len(runs) == 0 {
		fmt.Fprintln(os.Stderr, "agentbus replay: no recorded run found")
		return 1
	}
	gates, _ := js.KeyValue(ctx, runctl.BucketGates)
	cancels, _ := js.KeyValue(ctx, handlers.BucketCancels)
	ids := slices.Sorted(maps.Keys(runs))
	diverged := 0
	for _, id := range ids {
		rec := runs[id]
		rep := runctl.ReplayRun(id, rec.msgs, controlsOf(ctx, gates, cancels, rec.tenant, id))
		if len(rep.Divergences) > 0 {
			diverged++
		}
		if *asJSON {
			b, _ := json.Marshal(rep)
			fmt.Println(string(b))
			continue
		}
		status := "ok"
		if len(rep.Divergences) > 0 {
			status = fmt.Sprintf("DIVERGED (%d)", len(rep.Divergences))
		}
		fmt.Printf("%s %s: %d decisions re-derived, %s, %s\n", rec.tenant, id, rep.Decisions, orDash(rep.Code), status)
		for _, d := range rep.Divergences {
			fmt.Printf("    after %s %s: message %s\n      recorded: %s\n      replayed: %s\n", events.AuditName(d.Type), d.Input,
				d.Message, orDash(d.Recorded), d.Replayed)
		}
	}
	fmt.Printf("%d run(s) replayed, %d diverged\n", len(ids), diverged)
	if diverged > 0 {
		return 1
	}
	return 0
}

// recorded is one run's recorded messages.
type recorded struct {
	tenant string
	msgs   []event.Event
}

// recordedRuns reads the AGENT stream's orchestration messages stored
// since start, by run (only runID's when set, only tenant's when set).
func recordedRuns(ctx context.Context, js jetstream.JetStream, tenant string, start time.Time, runID string) (map[string]*recorded, error) {
	filter := "agent.>"
	if tenant != "" {
		filter = "agent.*.*." + tenant
	}
	cons, err := js.OrderedConsumer(ctx, events.StreamAgent, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &start})
	if err != nil {
		return nil, fmt.Errorf("read the AGENT stream: %w", err)
	}
	runs := map[string]*recorded{}
	for {
		batch, err := cons.Fetch(256, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return nil, err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			ev, err := events.FromMsg(m.Headers(), m.Data())
			if err != nil {
				continue
			}
			meta := events.MetaOf(ev)
			if meta.Run == "" || runID != "" && meta.Run != runID {
				continue
			}
			r := runs[meta.Run]
			if r == nil {
				r = &recorded{tenant: meta.Tenant}
				runs[meta.Run] = r
			}
			r.msgs = append(r.msgs, ev)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return nil, err
		}
		if n == 0 {
			return runs, nil
		}
	}
}

// controlsOf reads a run's recorded controls: its gates, its cancel and
// its interrupt.
func controlsOf(ctx context.Context, gates, cancels jetstream.KeyValue, tenant, runID string) runctl.ReplayControls {
	c := runctl.ReplayControls{Gates: map[string]runctl.GateRecord{}}
	if gates != nil {
		if recs, err := (&runctl.Gates{KV: gates}).List(ctx, tenant, runID); err == nil {
			for _, r := range recs {
				c.Gates[r.Gate.ID] = r
			}
		}
	}
	if cancels != nil {
		if e, err := cancels.Get(ctx, tenant+"."+runID); err == nil {
			var k runctl.Cancel
			_ = json.Unmarshal(e.Value(), &k)
			if k.At.IsZero() {
				k.At = e.Created()
			}
			c.Cancel = &k
		}
		if e, err := cancels.Get(ctx, tenant+"."+runID+".interrupt"); err == nil {
			var i runctl.Interrupt
			if json.Unmarshal(e.Value(), &i) == nil && strings.TrimSpace(i.ID) != "" {
				c.Interrupt = &i
			}
		}
	}
	return c
}
