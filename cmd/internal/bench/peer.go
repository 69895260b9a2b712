package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	json "github.com/go-json-experiment/json/v1"
)

// PeerResult is one LangGraph measurement, as bench/langgraph/peer.py prints it.
type PeerResult struct {
	Peer         string  `json:"peer"`
	Version      string  `json:"version"`
	Checkpointer string  `json:"checkpointer"`
	Concurrency  int     `json:"concurrency"`
	Runs         int     `json:"runs"`
	LatencyMS    int     `json:"latency_ms"`
	ModelCalls   int     `json:"model_calls_per_run"`
	RunsPerS     float64 `json:"runs_per_s"`
	P50          float64 `json:"p50_ms"`
	P99          float64 `json:"p99_ms"`
	Mean         float64 `json:"mean_ms"`
	Errors       int     `json:"errors"`
	WallS        float64 `json:"wall_s"` // the measured phase's wall time
	// Spread and Reps: as a Throughput's (the figures above are the
	// repetitions' medians).
	Spread Spread `json:"spread"`
	Reps   []Rep  `json:"repetitions,omitempty"`
}

// peer runs the LangGraph harness in bench/langgraph: setup.sh installs it
// into a git-ignored virtualenv; peer.py measures one configuration.
type peer struct {
	dir    string // bench/langgraph
	python string
}

// setupPeer installs the peer, or says why it cannot.
func setupPeer(ctx context.Context, root string) (*peer, error) {
	dir := filepath.Join(root, "bench", "langgraph")
	if _, err := os.Stat(filepath.Join(dir, "peer.py")); err != nil {
		return nil, fmt.Errorf("langgraph-unavailable: %s not found", dir)
	}
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(dir, "setup.sh"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.Index(msg, "langgraph-unavailable:"); i >= 0 {
			msg = msg[i:]
		}
		return nil, fmt.Errorf("langgraph-unavailable: setup failed: %v: %s", err, lastLine(msg))
	}
	return &peer{dir: dir, python: filepath.Join(root, "bench", ".venv", "bin", "python")}, nil
}

// measure runs one configuration of the peer: warm runs at concurrency
// conc, then conc runs in flight for l (peer.py's --runs and
// --min-seconds), with a model of latencyMS per call.
func (p *peer) measure(ctx context.Context, checkpointer string, conc int, l load, warm, latencyMS int) (PeerResult, error) {
	var res PeerResult
	cmd := exec.CommandContext(ctx, p.python, filepath.Join(p.dir, "peer.py"), "--checkpointer", checkpointer,
		"--concurrency", fmt.Sprint(conc), "--runs", fmt.Sprint(l.runs), "--min-seconds", fmt.Sprint(l.dur.Seconds()),
		"--latency-ms", fmt.Sprint(latencyMS), "--warmup", fmt.Sprint(warm))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return res, fmt.Errorf("langgraph %s c%d: %v: %s", checkpointer, conc, err, lastLine(stderr.String()))
	}
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &res); err != nil {
		return res, fmt.Errorf("langgraph output: %w", err)
	}
	if res.Errors > 0 {
		return res, fmt.Errorf("langgraph %s c%d: %d runs failed", checkpointer, conc, res.Errors)
	}
	return res, nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndex(s, "\n"); i >= 0 {
		return s[i+1:]
	}
	return s
}
