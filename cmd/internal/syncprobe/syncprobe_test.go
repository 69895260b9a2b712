package syncprobe

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestSyncProbe: every stream count gets a point, in order, with a rate
// inside its range, and the table names each one beside the one stream.
func TestRun(t *testing.T) {
	cfg := Config{Streams: []int{1, 3}, Concurrency: 6, Size: 512, Duration: 150 * time.Millisecond, Reps: 2}
	pts, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 2 || pts[0].Streams != 1 || pts[1].Streams != 3 {
		t.Fatalf("points %+v", pts)
	}
	for _, p := range pts {
		if p.MsgsPerS <= 0 || p.MsgsPerS < p.Min || p.MsgsPerS > p.Max {
			t.Errorf("%d streams: %.0f msgs/s, range %.0f–%.0f", p.Streams, p.MsgsPerS, p.Min, p.Max)
		}
	}
	var b strings.Builder
	Print(&b, cfg, pts)
	if !strings.Contains(b.String(), "1.00×") || strings.Count(b.String(), "\n") != 4 {
		t.Errorf("table:\n%s", b.String())
	}
	if _, err := Run(context.Background(), Config{Streams: []int{1}}); err == nil {
		t.Error("a probe without publishers or duration ran")
	}
}
