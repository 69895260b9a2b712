package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeContender records the order it is measured in and what it files.
func fakeContender(name string, order *[]string, filed map[string][]int, fail func(conc, call int) error) *contender {
	calls := 0
	return &contender{name: name, ref: [3]float64{10, 10, 10},
		measure: func(_ context.Context, conc int) (Rep, error) {
			calls++
			if fail != nil {
				if err := fail(conc, calls); err != nil {
					return Rep{}, err
				}
			}
			*order = append(*order, fmt.Sprintf("%s%d", name, conc))
			return Rep{Runs: calls, RunsPerS: float64(calls)}, nil
		},
		record: func(conc int, reps []Rep) { filed[name] = append(filed[name], conc, len(reps)) },
	}
}

// TestInterleave: at each concurrency, repetition 1 of every contender,
// then repetition 2 of every one, and so on; each point is filed once
// with all its repetitions.
func TestInterleave(t *testing.T) {
	var order []string
	filed := map[string][]int{}
	cs := []*contender{fakeContender("A", &order, filed, nil), fakeContender("B", &order, filed, nil), fakeContender("C", &order, filed, nil)}
	cfg := Config{Concurrency: []int{1, 8}, Repetitions: 3, Log: io.Discard, PointRuns: quickPointRuns}
	if err := interleave(context.Background(), cfg, cs, time.Now()); err != nil {
		t.Fatal(err)
	}
	want := strings.Fields("A1 B1 C1 A1 B1 C1 A1 B1 C1 A8 B8 C8 A8 B8 C8 A8 B8 C8")
	if !slices.Equal(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
	for _, name := range []string{"A", "B", "C"} {
		if got := filed[name]; !slices.Equal(got, []int{1, 3, 8, 3}) {
			t.Errorf("%s filed %v, want concurrency 1 and 8 with 3 repetitions each", name, got)
		}
	}
}

// TestInterleaveFailures: a peer that fails is left out from then on
// (and files nothing more), the others go on; any other contender's
// failure fails the benchmark.
func TestInterleaveFailures(t *testing.T) {
	var order []string
	filed := map[string][]int{}
	var dropped error
	peer := fakeContender("P", &order, filed, func(conc, call int) error {
		if conc == 8 {
			return errors.New("peer gone")
		}
		return nil
	})
	peer.off = func() bool { return dropped != nil }
	peer.drop = func(err error) { dropped = err }
	cs := []*contender{fakeContender("A", &order, filed, nil), peer}
	cfg := Config{Concurrency: []int{1, 8}, Repetitions: 2, Log: io.Discard, PointRuns: quickPointRuns}
	if err := interleave(context.Background(), cfg, cs, time.Now()); err != nil {
		t.Fatal(err)
	}
	if want := strings.Fields("A1 P1 A1 P1 A8 A8"); !slices.Equal(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
	if dropped == nil || !slices.Equal(filed["P"], []int{1, 2}) || !slices.Equal(filed["A"], []int{1, 2, 8, 2}) {
		t.Errorf("dropped %v, filed %v", dropped, filed)
	}
	broken := fakeContender("B", &order, filed, func(int, int) error { return errors.New("deploy failed") })
	err := interleave(context.Background(), cfg, []*contender{broken}, time.Now())
	if err == nil || !strings.Contains(err.Error(), "deploy failed") {
		t.Errorf("a failing agentbus contender: %v", err)
	}
}

// TestEstimate: with the reference rates, a full benchmark is expected to
// take under 35 minutes, and a quick one (executor processes included)
// about a minute.
func TestEstimate(t *testing.T) {
	r := &Report{Modes: []ModeReport{{Mode: "default"}, {Mode: "sync_always"}}, Peer: PeerReport{Available: true},
		Restate: RestateReport{Available: true}}
	servers := []*benchServer{nil, nil}
	for _, quick := range []bool{false, true} {
		cfg := Config{Quick: quick}
		cfg.defaults()
		cs := r.contenders(cfg, servers, nil, nil)
		if len(cs) != 12 { // default: agentbus twice, three skeleton traffics twice; sync_always: agentbus; two LangGraph; Restate
			t.Fatalf("%d contenders", len(cs))
		}
		got, limit := estimate(cfg, len(r.Modes), cs), 35*time.Minute
		if quick {
			limit = 90 * time.Second
		}
		t.Logf("quick %v: expected %s", quick, minutes(got))
		if got > limit || got < limit/10 {
			t.Errorf("quick %v: expected to take %s", quick, minutes(got))
		}
	}
}
