package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	restate "github.com/restatedev/sdk-go"
	"github.com/restatedev/sdk-go/server"
)

// The plan's shape, as in bench/langgraph/peer.py.
const (
	planSteps = 5
	nOutlets  = 8
)

// Input is one run's request.
type Input struct {
	Task string `json:"task"`
}

// Output is one run's result.
type Output struct {
	Answer     string `json:"answer"`
	Steps      int    `json:"steps"`
	ModelCalls int    `json:"model_calls"`
}

// toolCall is the "decide" model call's answer.
type toolCall struct {
	Tool  string `json:"tool"`
	Query string `json:"query"`
	Limit int    `json:"limit"`
}

// outlet is one item of the fake skill's result.
type outlet struct {
	ID    string  `json:"id"`
	Score float64 `json:"score"`
}

// stepOutput is the "step_output" model call's answer.
type stepOutput struct {
	Summary string   `json:"summary"`
	Top     []string `json:"top"`
	Step    int      `json:"step"`
}

// Pipeline is the Restate service of the benchmark.
type Pipeline struct{}

// Run plans five steps, runs each (decide, call the skill, write the
// output) and synthesises an answer: 1 + 5*2 + 1 = 12 model calls and 5
// skill calls, each a journaled step.
func (Pipeline) Run(ctx restate.Context, in Input) (Output, error) {
	calls := 0
	plan, err := restate.Run(ctx, func(restate.RunContext) ([]string, error) {
		steps := make([]string, planSteps)
		for i := range steps {
			steps[i] = fmt.Sprintf("step %d: rank outlets for '%s' angle %d", i+1, in.Task, i+1)
		}
		return steps, nil
	}, restate.WithName("plan"))
	if err != nil {
		return Output{}, err
	}
	calls++
	var outputs []stepOutput
	for i, text := range plan {
		call, err := restate.Run(ctx, func(restate.RunContext) (toolCall, error) {
			return toolCall{Tool: "rank_outlets", Query: text, Limit: nOutlets}, nil
		}, restate.WithName("decide"))
		if err != nil {
			return Output{}, err
		}
		result, err := restate.Run(ctx, func(restate.RunContext) ([]outlet, error) {
			return rankOutlets(call.Query, call.Limit), nil
		}, restate.WithName(call.Tool))
		if err != nil {
			return Output{}, err
		}
		out, err := restate.Run(ctx, func(restate.RunContext) (stepOutput, error) {
			top := append([]outlet(nil), result...)
			sort.SliceStable(top, func(a, b int) bool { return top[a].Score > top[b].Score })
			ids := []string{}
			for _, o := range top[:min(3, len(top))] {
				ids = append(ids, o.ID)
			}
			return stepOutput{Summary: "done: " + text, Top: ids, Step: i}, nil
		}, restate.WithName("step_output"))
		if err != nil {
			return Output{}, err
		}
		calls += 2
		outputs = append(outputs, out)
	}
	answer, err := restate.Run(ctx, func(restate.RunContext) (string, error) {
		parts := make([]string, len(outputs))
		for i, o := range outputs {
			parts[i] = o.Summary
		}
		return in.Task + ": " + strings.Join(parts, "; "), nil
	}, restate.WithName("synthesize"))
	if err != nil {
		return Output{}, err
	}
	calls++
	return Output{Answer: answer, Steps: len(outputs), ModelCalls: calls}, nil
}

// rankOutlets is the fake skill: a deterministic list of outlet ids and
// scores derived from the query, as peer.py's rank_outlets.
func rankOutlets(query string, limit int) []outlet {
	seed := uint64(crc32.ChecksumIEEE([]byte(query)))
	out := make([]outlet, limit)
	for i := range out {
		seed = (seed*1103515245 + 12345) & 0x7FFFFFFF
		out[i] = outlet{ID: fmt.Sprintf("outlet-%04d", seed%10000), Score: float64(seed%1000) / 1000}
	}
	return out
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address of the service endpoint")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, *addr); err != nil {
		fmt.Fprintln(os.Stderr, "restatepeer:", err)
		os.Exit(1)
	}
}

// serve runs the endpoint on addr until ctx ends.
func serve(ctx context.Context, addr string) error {
	logs := slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})
	handler, err := server.NewRestate().WithLogger(logs, true).Bind(restate.Reflect(Pipeline{})).Handler()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: handler, Protocols: &protocols, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Printf("restatepeer listening on %s\n", ln.Addr())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
