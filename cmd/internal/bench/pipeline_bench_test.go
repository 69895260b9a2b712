package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/agentbus/agentbus/cmd/internal/bench/host"
	"github.com/agentbus/agentbus/cmd/internal/bench/pipeline"
)

// BenchmarkPipelineRun runs the benchmark's 5-step pipeline with every
// role over TCP, one run at a time (c1) and 64 at once (c64), and reports
// the process's CPU a run (roles, server and projector): a quick loop for
// a change to the hop's work, with a CPU profile split by hop (the
// workers label their handlers by role and event type):
//
//	go test ./cmd/internal/bench -run NONE -bench PipelineRun -benchtime 3000x -cpuprofile cpu.out
//	go tool pprof -tags cpu.out
//
// It is no substitute for make bench: one machine's noise moves it by
// about 8 % from run to run, so compare interleaved runs' medians.
func BenchmarkPipelineRun(b *testing.B) {
	for _, conc := range []int{1, 64} {
		b.Run(fmt.Sprintf("c%d", conc), func(b *testing.B) { benchPipeline(b, conc) })
	}
}

func benchPipeline(b *testing.B, conc int) {
	ctx := context.Background()
	d := pipelineDeployment(b)
	for range 50 { // warm-up: connections, caches, the stacks of the pools
		if _, _, err := d.run(ctx, pipeline.Task); err != nil {
			b.Fatal(err)
		}
	}
	runs := make(chan struct{})
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for range runs {
				if _, _, err := d.run(ctx, pipeline.Task); err != nil {
					b.Error(err)
				}
			}
		})
	}
	cpu := host.ProcessCPU()
	b.ResetTimer()
	// Not b.Loop: it stops the timer when the last run is handed out, and
	// at c64 the last 64 would run off the clock.
	for range b.N {
		runs <- struct{}{}
	}
	close(runs)
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64((host.ProcessCPU()-cpu).Microseconds())/1000/float64(b.N), "cpu-ms/run")
}
