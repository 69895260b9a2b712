package bench

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestSkeletonSendsItsTraffic: a skeleton run stores, per run, exactly
// the messages and KV writes its traffic names, on a real server.
func TestSkeletonSendsItsTraffic(t *testing.T) {
	ctx := context.Background()
	srv, err := startServer(modes[0])
	if err != nil {
		t.Fatal(err)
	}
	defer srv.close()
	for _, traffic := range skelTraffics {
		const conc, total = 2, 6
		mon, err := nats.Connect(srv.srv.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		reads := map[string]uint64{}
		readsDone := make(chan struct{})
		sub, err := mon.Subscribe("$JS.API.DIRECT.GET.>", func(m *nats.Msg) {
			if m.Subject == "$JS.API.DIRECT.GET.END" {
				close(readsDone)
				return
			}
			reads[strings.TrimPrefix(sentKind(m.Subject, m.Reply), "kv.read.")]++
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := mon.Flush(); err != nil {
			t.Fatal(err)
		}
		tp, err := skeleton(ctx, srv, traffic, true, conc, fixed(total), conc)
		if err != nil {
			t.Fatal(err)
		}
		// A marker after every read, on the same subscription: once it
		// arrives, every read before it has been counted.
		if err := mon.Publish("$JS.API.DIRECT.GET.END", nil); err != nil {
			t.Fatal(err)
		}
		<-readsDone
		_ = sub.Unsubscribe()
		mon.Close()
		if tp.Runs != total || tp.RunsPerS <= 0 || tp.Latency.N != total || tp.CPUPerRunMS <= 0 {
			t.Fatalf("%s: throughput %+v", traffic.name, tp)
		}
		runs := uint64(total + conc) // the warm-up's runs too
		_, js, err := srv.connect(false)
		if err != nil {
			t.Fatal(err)
		}
		name := "SKEL_" + strings.ToUpper(traffic.name) + "_true_2"
		last := func(stream string) uint64 {
			s, err := js.Stream(ctx, stream)
			if err != nil {
				t.Fatal(err)
			}
			info, err := s.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return info.State.LastSeq
		}
		// The chain's inputs and outputs: the request, 18 hop outputs,
		// the extras.
		if got, want := last(name), runs*uint64(1+skelHops+traffic.extras); got != want {
			t.Errorf("%s: %d chain messages, want %d", traffic.name, got, want)
		}
		audits := runs * skelHops
		if traffic.trail > 0 { // each trail rides in its hop's output
			audits = 0
		}
		if got, want := last(name+"_AUDIT"), audits; got != want {
			t.Errorf("%s: %d audit messages, want %d", traffic.name, got, want)
		}
		if got, want := last(name+"_STORE"), runs*uint64(traffic.copies); got != want {
			t.Errorf("%s: %d store copies, want %d", traffic.name, got, want)
		}
		writes := map[string]uint64{}
		for _, list := range [][]skelWrite{traffic.hopWrites, traffic.projWrites} {
			for _, w := range list {
				writes[w.bucket] += runs * uint64(w.count)
			}
		}
		wantReads := map[string]uint64{}
		for _, r := range traffic.hopReads {
			writes[r.bucket]++ // the key the reads read, written once
			wantReads[strings.ToLower(name)+"_"+r.bucket] += runs * uint64(r.count)
		}
		if len(reads) != len(wantReads) {
			t.Errorf("%s: reads %v, want %v", traffic.name, reads, wantReads)
		}
		for bucket, want := range wantReads {
			if reads[bucket] != want {
				t.Errorf("%s: %d reads of %s, want %d", traffic.name, reads[bucket], bucket, want)
			}
		}
		for bucket, want := range writes {
			if got := last("KV_" + strings.ToLower(name) + "_" + bucket); got != want {
				t.Errorf("%s: %d writes to %s, want %d", traffic.name, got, bucket, want)
			}
		}
		cons, err := js.Consumer(ctx, name, "hops")
		if err != nil {
			t.Fatal(err)
		}
		if info, err := cons.Info(ctx); err != nil || info.NumAckPending != 0 || info.NumPending != 0 || info.NumRedelivered != 0 {
			t.Errorf("%s: hops consumer %+v, %v", traffic.name, info, err)
		}
		projStream := name + "_AUDIT"
		if traffic.trail > 0 {
			projStream = name
		}
		proj, err := js.Consumer(ctx, projStream, "projector")
		if err != nil {
			t.Fatal(err)
		}
		if info, err := proj.Info(ctx); err != nil || info.NumAckPending != 0 || info.NumPending != 0 || info.NumRedelivered != 0 ||
			info.Delivered.Stream != last(projStream) {
			t.Errorf("%s: projector consumer %+v, %v", traffic.name, info, err)
		}
	}
}
