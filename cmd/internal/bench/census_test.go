package bench

import (
	"context"
	"math"
	"strings"
	"testing"
)

// TestCensusCountsARunsTraffic: the census of real runs on a real server
// counts each stored message once, by stream and by kind, with the bytes
// each kind carried; a memory (its text and its offline embedding) costs
// well under a kilobyte.
func TestCensusCountsARunsTraffic(t *testing.T) {
	srv, err := startServer(modes[0])
	if err != nil {
		t.Fatal(err)
	}
	defer srv.close()
	c, err := census(context.Background(), srv, 20)
	if err != nil {
		t.Fatal(err)
	}
	if c.Runs != 20 || c.RecordsPerRun["AGENT"] == 0 || c.RecordsPerRun["AGENT"] != c.SentPerRun["publish.AGENT"] {
		t.Fatalf("AGENT: %v stored a run, %v published", c.RecordsPerRun["AGENT"], c.SentPerRun["publish.AGENT"])
	}
	var bytes float64
	for k, b := range c.BytesPerRun {
		if c.SentPerRun[k] == 0 {
			t.Errorf("%s: %.0f bytes a run and no message", k, b)
		}
		bytes += b
	}
	if bytes == 0 || math.Abs(bytes-c.Bytes) > 1e-6*bytes {
		t.Fatalf("bytes %v, by kind %v", c.Bytes, c.BytesPerRun)
	}
	// An AGENT message carries its trail in a header: counted too.
	if perMsg := c.BytesPerRun["publish.AGENT"] / c.SentPerRun["publish.AGENT"]; perMsg < 1024 {
		t.Errorf("an AGENT message is %.0f bytes", perMsg)
	}
	writes := c.SentPerRun["kv.write.store_memory"]
	if perWrite := c.BytesPerRun["kv.write.store_memory"] / writes; writes == 0 || perWrite > 1024 {
		t.Errorf("%.1f memory writes a run of %.0f bytes each", writes, perWrite)
	}
	var out strings.Builder
	c.print(&out)
	if !strings.Contains(out.String(), "(payloads and headers) sent by the clients a run") {
		t.Errorf("census printed:\n%s", out.String())
	}
}
