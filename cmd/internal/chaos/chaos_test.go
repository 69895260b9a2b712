package chaos

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/agentbus/agentbus/cmd/internal/procs"
)

// TestChaos is a small `make chaos`: 20 runs against the multi-process
// deployment while four faults of each kind strike: kill -9 of a random
// role, a nats-server stop (SIGKILL or SIGTERM) and restart, a
// SIGSTOPped executor. No run may be lost, no skill key executed
// twice, no answer differ from the fault-free one. AGENTBUS_CHAOS_SEED
// picks another fault schedule.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills OS processes for about a minute")
	}
	seed := int64(18)
	if v, err := strconv.ParseInt(os.Getenv("AGENTBUS_CHAOS_SEED"), 10, 64); err == nil {
		seed = v
	}
	// The build has its own budget: on a cold build cache, beside the
	// other packages' race-enabled test builds, it can take minutes.
	bctx, bcancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer bcancel()
	bin := t.TempDir()
	if err := procs.BuildRoles(bctx, bin, true); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var out procs.Buffer
	start := time.Now()
	sum, err := Run(ctx, Config{
		BinDir: bin, Runs: 20, Faults: 12, Seed: seed, Concurrency: 4,
		HTTPTimeout: 20 * time.Second, RunWait: 20 * time.Second, Settle: 60 * time.Second,
		WorkDir: t.TempDir(), Out: &out,
	})
	t.Logf("chaos output (%s):\n%s", time.Since(start).Round(time.Second), out.String())
	if err != nil {
		t.Fatal(err)
	}
	if !sum.OK() {
		t.Fatalf("chaos found problems: %s", sum.Line())
	}
	for _, k := range FaultKinds {
		if sum.Faults[k] < 4 {
			t.Errorf("%d %s faults injected, want 4", sum.Faults[k], k)
		}
	}
	if sum.Runs != 20 || sum.Executions < 2*sum.Runs {
		t.Errorf("summary %s: want 20 runs and at least 2 skill executions each", sum.Line())
	}
}
