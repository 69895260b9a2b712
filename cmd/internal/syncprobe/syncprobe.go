// Package syncprobe measures how many synced publishes a second an
// embedded nats-server acknowledges as the publishers spread over more
// streams (agentbus-dev syncprobe): what sharding AGENT would buy at equal
// durability, on the machine's disk, without building it.
package syncprobe

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
)

// Config configures Run.
type Config struct {
	// Streams are the stream counts to measure, each on its own server.
	Streams []int
	// Concurrency is how many publishers publish at once, spread evenly
	// over the streams; Size is each message's size.
	Concurrency, Size int
	// Duration is how long each repetition of a point publishes; Reps how
	// many repetitions, interleaved (every count once, then again).
	Duration time.Duration
	Reps     int
}

// Point is what a server with Streams streams took: the median of the
// repetitions' publishes a second, and their lowest and highest.
type Point struct {
	Streams            int
	MsgsPerS, Min, Max float64
}

// Run measures how many publishes a second nats-server
// acknowledges with sync_interval: always (each message on disk before
// its acknowledgement, the equal-durability mode) when the publishers are
// spread over more streams. The server syncs a stream's writes one at a
// time, under the stream's lock, and so streams are the only writes it
// syncs side by side: the probe shows what sharding AGENT would buy at
// equal durability, on this machine's disk, without building it.
func Run(ctx context.Context, cfg Config) ([]Point, error) {
	if len(cfg.Streams) == 0 || cfg.Concurrency < 1 || cfg.Reps < 1 || cfg.Duration <= 0 {
		return nil, fmt.Errorf("sync probe: streams, concurrency, repetitions and duration must be set")
	}
	rates := make([][]float64, len(cfg.Streams))
	for range cfg.Reps {
		for i, n := range cfg.Streams {
			r, err := once(ctx, n, cfg)
			if err != nil {
				return nil, fmt.Errorf("sync probe, %d streams: %w", n, err)
			}
			rates[i] = append(rates[i], r)
		}
	}
	out := make([]Point, len(cfg.Streams))
	for i, n := range cfg.Streams {
		r := slices.Sorted(slices.Values(rates[i]))
		mid := r[len(r)/2]
		if len(r)%2 == 0 {
			mid = (r[len(r)/2-1] + mid) / 2
		}
		out[i] = Point{Streams: n, MsgsPerS: mid, Min: r[0], Max: r[len(r)-1]}
	}
	return out, nil
}

// once publishes for cfg.Duration to n streams of a fresh sync_always
// server and returns the acknowledged publishes a second.
func once(ctx context.Context, n int, cfg Config) (float64, error) {
	dir, err := os.MkdirTemp("", "agentbus-syncprobe-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	srv, err := events.RunServer(events.ServerConfig{Port: -1, StoreDir: dir, SyncAlways: true})
	if err != nil {
		return 0, err
	}
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	nc, err := nats.Connect(srv.ClientURL(), nats.Name("agentbus-syncprobe"))
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	for i := range max(n, 1) {
		name := "PROBE" + strconv.Itoa(i)
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{"probe." + strconv.Itoa(i)}}); err != nil {
			return 0, err
		}
	}
	data := make([]byte, cfg.Size)
	var (
		sent     atomic.Int64
		wg       sync.WaitGroup
		firstErr error
		failOnce sync.Once
	)
	start := time.Now()
	for w := range cfg.Concurrency {
		wg.Go(func() {
			subject := "probe." + strconv.Itoa(w%max(n, 1))
			for time.Since(start) < cfg.Duration {
				if _, err := js.Publish(ctx, subject, data); err != nil {
					failOnce.Do(func() { firstErr = err })
					return
				}
				sent.Add(1)
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	return float64(sent.Load()) / time.Since(start).Seconds(), nil
}

// Print writes the probe's points as a table, each count's rate beside
// the first's.
func Print(w io.Writer, cfg Config, pts []Point) {
	fmt.Fprintf(w, "synced publishes (sync_interval: always), %d publishers, %d-byte messages, %d × %s interleaved\n",
		cfg.Concurrency, cfg.Size, cfg.Reps, cfg.Duration)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "streams\tmsgs/s (median)\trange\t/ %d stream(s)\n", pts[0].Streams)
	for _, p := range pts {
		ratio := "-"
		if base := pts[0]; base.MsgsPerS > 0 {
			ratio = fmt.Sprintf("%.2f×", p.MsgsPerS/base.MsgsPerS)
		}
		fmt.Fprintf(tw, "%d\t%.0f\t%.0f–%.0f\t%s\n", p.Streams, p.MsgsPerS, p.Min, p.Max, ratio)
	}
	tw.Flush()
}
