package bench

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// SyncProbeConfig configures SyncProbe.
type SyncProbeConfig struct {
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

// SyncProbePoint is what a server with Streams streams took.
type SyncProbePoint struct {
	Streams  int     `json:"streams"`
	MsgsPerS float64 `json:"msgs_per_s"` // the median of the repetitions
	Range    Range   `json:"range"`
}

// SyncProbe measures how many publishes a second nats-server
// acknowledges with sync_interval: always (each message on disk before
// its acknowledgement, the equal-durability mode) when the publishers are
// spread over more streams. The server syncs a stream's writes one at a
// time, under the stream's lock, and so streams are the only writes it
// syncs side by side: the probe shows what sharding AGENT would buy at
// equal durability, on this machine's disk, without building it.
func SyncProbe(ctx context.Context, cfg SyncProbeConfig) ([]SyncProbePoint, error) {
	if len(cfg.Streams) == 0 || cfg.Concurrency < 1 || cfg.Reps < 1 || cfg.Duration <= 0 {
		return nil, fmt.Errorf("sync probe: streams, concurrency, repetitions and duration must be set")
	}
	rates := make([][]float64, len(cfg.Streams))
	for range cfg.Reps {
		for i, n := range cfg.Streams {
			r, err := syncProbeOnce(ctx, n, cfg)
			if err != nil {
				return nil, fmt.Errorf("sync probe, %d streams: %w", n, err)
			}
			rates[i] = append(rates[i], r)
		}
	}
	out := make([]SyncProbePoint, len(cfg.Streams))
	for i, n := range cfg.Streams {
		out[i] = SyncProbePoint{Streams: n, MsgsPerS: median(rates[i]), Range: rangeOf(rates[i])}
	}
	return out, nil
}

// syncProbeOnce publishes for cfg.Duration to n streams of a fresh
// sync_always server and returns the acknowledged publishes a second.
func syncProbeOnce(ctx context.Context, n int, cfg SyncProbeConfig) (float64, error) {
	srv, err := startServer(mode{Name: "sync_always", SyncAlways: true})
	if err != nil {
		return 0, err
	}
	defer srv.close()
	nc, js, err := srv.connect(true)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
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
		once     sync.Once
	)
	start := time.Now()
	for w := range cfg.Concurrency {
		wg.Go(func() {
			subject := "probe." + strconv.Itoa(w%max(n, 1))
			for time.Since(start) < cfg.Duration {
				if _, err := js.Publish(ctx, subject, data); err != nil {
					once.Do(func() { firstErr = err })
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

// PrintSyncProbe writes the probe's points as a table, each count's rate
// beside the one stream's.
func PrintSyncProbe(w io.Writer, cfg SyncProbeConfig, pts []SyncProbePoint) {
	fmt.Fprintf(w, "synced publishes (sync_interval: always), %d publishers, %d-byte messages, %d × %s interleaved\n",
		cfg.Concurrency, cfg.Size, cfg.Reps, cfg.Duration)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "streams\tmsgs/s (median)\trange\t/ 1 stream")
	for _, p := range pts {
		ratio := "-"
		if base := pts[0]; base.MsgsPerS > 0 {
			ratio = fmt.Sprintf("%.2f×", p.MsgsPerS/base.MsgsPerS)
		}
		fmt.Fprintf(tw, "%d\t%.0f\t%.0f–%.0f\t%s\n", p.Streams, p.MsgsPerS, p.Range.Min, p.Range.Max, ratio)
	}
	tw.Flush()
}
