package bench

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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
	// Every AGENT record was published by a client, but for a scheduled
	// alert evaluation the server stores itself when the count spans the
	// turn of a minute.
	if stored, sent := c.RecordsPerRun["AGENT"], c.SentPerRun["publish.AGENT"]+c.FiredPerRun["AGENT"]; c.Runs != 20 || stored == 0 ||
		math.Abs(stored-sent) > 1e-9 {
		t.Fatalf("AGENT: %v stored a run, %v published, %v fired", stored, c.SentPerRun["publish.AGENT"], c.FiredPerRun["AGENT"])
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

// TestFiredCountsTheServersScheduledMessages: of a stream's records, the
// census tells those the server stored when a scheduled message fell due
// from those a client published.
func TestFiredCountsTheServersScheduledMessages(t *testing.T) {
	srv, err := startServer(modes[0])
	if err != nil {
		t.Fatal(err)
	}
	defer srv.close()
	ctx := context.Background()
	nc, js, err := srv.connect(true)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "CENSUS", Subjects: []string{"census.>"}, AllowMsgSchedules: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "census.plain", []byte("x")); err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg("census.schedule")
	m.Header.Set(jetstream.ScheduleHeader, "@at "+time.Now().UTC().Add(time.Second).Format(time.RFC3339))
	m.Header.Set(jetstream.ScheduleTargetHeader, "census.due")
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	var last uint64
	for deadline := time.Now().Add(10 * time.Second); last < 3; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the schedule did not fall due: last sequence %d", last)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		last = info.State.LastSeq
	}
	if _, err := js.Publish(ctx, "census.plain", []byte("y")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		from, to uint64
		want     int
	}{{0, 4, 1}, {0, 2, 0}, {2, 4, 1}, {3, 4, 0}, {4, 4, 0}} {
		if got, err := fired(ctx, js, "CENSUS", tc.from, tc.to); err != nil || got != tc.want {
			t.Errorf("fired(%d, %d) = %d, %v; want %d", tc.from, tc.to, got, err, tc.want)
		}
	}
}
