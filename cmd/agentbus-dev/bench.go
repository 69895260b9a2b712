package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/cmd/internal/bench"
	"github.com/agentbus/agentbus/cmd/internal/syncprobe"
)

// runBench measures agentbus beside the JetStream floor and LangGraph.
func runBench(args []string) int {
	fs := flag.NewFlagSet("agentbus-dev bench", flag.ExitOnError)
	var cfg bench.Config
	fs.StringVar(&cfg.Root, "root", ".", "repository root (holds bench/langgraph)")
	fs.StringVar(&cfg.OutDir, "out", "bench/out", "where bench.json and latency.svg are written")
	fs.BoolVar(&cfg.Quick, "quick", false, "small samples (smoke test)")
	fs.BoolVar(&cfg.SkipPeer, "skip-peer", false, "do not measure the peers (LangGraph, Restate)")
	fs.BoolVar(&cfg.SkipScaling, "skip-scaling", false, "do not measure executor processes (1, 2, 4; quick 1, 2)")
	fs.StringVar(&cfg.BinDir, "bin", "", "directory holding the executor and restatepeer binaries (default: beside this agentbus-dev; each built if absent)")
	timeout := fs.Duration("timeout", 60*time.Minute, "give up after this long")
	modes := fs.String("modes", "", "durability modes to measure, comma-separated: default, sync_always (default both)")
	conc := fs.String("concurrency", "", "concurrency points of the throughput runs, comma-separated (default 1,8,64; quick 1,8)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
	memProfile := fs.String("memprofile", "", "write the allocations of the whole run to this file at its end (go tool pprof -sample_index=alloc_space)")
	app.ParseFlags(fs, args)
	if *modes != "" {
		cfg.ModesToRun = strings.Split(*modes, ",")
	}
	for _, c := range strings.Split(*conc, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(c)); err == nil && n > 0 {
			cfg.Concurrency = append(cfg.Concurrency, n)
		}
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := app.SignalContext()
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	r, err := bench.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	if *memProfile != "" {
		if err := writeAllocs(*memProfile); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
	}
	r.Print(os.Stdout)
	return 0
}

// writeAllocs writes the process's allocation profile to path.
func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// runSyncProbe measures synced publishes over 1 and more streams.
func runSyncProbe(args []string) int {
	fs := flag.NewFlagSet("agentbus-dev syncprobe", flag.ExitOnError)
	cfg := syncprobe.Config{}
	streams := fs.String("streams", "1,2,4,8,16", "stream counts to measure, comma-separated")
	fs.IntVar(&cfg.Concurrency, "concurrency", 64, "publishers publishing at once, spread evenly over the streams")
	fs.IntVar(&cfg.Size, "size", 3725, "bytes per message (the default is about an AGENT message of the benchmark's run)")
	fs.DurationVar(&cfg.Duration, "duration", 5*time.Second, "how long each repetition of a point publishes")
	fs.IntVar(&cfg.Reps, "reps", 3, "repetitions of every point, interleaved")
	app.ParseFlags(fs, args)
	for _, s := range strings.Split(*streams, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil && n > 0 {
			cfg.Streams = append(cfg.Streams, n)
		}
	}
	ctx, stop := app.SignalContext()
	defer stop()
	pts, err := syncprobe.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "syncprobe:", err)
		return 1
	}
	syncprobe.Print(os.Stdout, cfg, pts)
	return 0
}
