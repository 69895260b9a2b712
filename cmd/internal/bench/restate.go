package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/cmd/internal/bench/pipeline"
	"github.com/agentbus/agentbus/cmd/internal/procs"
)

// restateSteps is the journaled steps of one Restate run: 12 model calls
// and 5 skill calls (cmd/dev/restatepeer).
const restateSteps = 17

// RestateResult is one closed-loop load point of the Restate peer.
type RestateResult struct {
	Concurrency int     `json:"concurrency"`
	Runs        int     `json:"runs"`
	RunsPerS    float64 `json:"runs_per_s"`
	Latency     Dist    `json:"run_latency"`
	// Spread and Reps: as a Throughput's (the figures above are the
	// repetitions' medians).
	Spread Spread `json:"spread"`
	Reps   []Rep  `json:"repetitions,omitempty"`
}

// RestateReport holds the Restate figures, or why there are none.
type RestateReport struct {
	Available   bool            `json:"available"`
	Reason      string          `json:"reason,omitempty"`
	Version     string          `json:"version,omitempty"`
	StepsPerRun int             `json:"durable_steps_per_run,omitempty"`
	Results     []RestateResult `json:"results,omitempty"`
}

// RestateComparison is agentbus against Restate at one concurrency.
type RestateComparison struct {
	Mode        string  `json:"mode"` // agentbus's durability mode
	Concurrency int     `json:"concurrency"`
	RunsPerS    float64 `json:"runs_per_s_ratio"`  // agentbus / Restate, of the medians
	P50         float64 `json:"p50_latency_ratio"` // agentbus p50 / Restate p50: below 1 is faster
	// RunsPerSRange is the lowest and highest runs/s ratio of a
	// repetition of agentbus to the Restate repetition measured next to
	// it (zero with a single repetition).
	RunsPerSRange Range `json:"runs_per_s_ratio_range"`
}

// compareRestate pairs each mode's throughput points (one executor) with
// the Restate points of the same concurrency.
func compareRestate(modes []ModeReport, rr RestateReport) []RestateComparison {
	var out []RestateComparison
	for _, m := range modes {
		for _, tp := range m.Throughput {
			if tp.Executors != 1 {
				continue
			}
			for _, res := range rr.Results {
				if res.Concurrency == tp.Concurrency {
					out = append(out, RestateComparison{Mode: m.Mode, Concurrency: res.Concurrency,
						RunsPerS: ratio(tp.RunsPerS, res.RunsPerS), P50: ratio(tp.Latency.P50, res.Latency.P50),
						RunsPerSRange: pairedRatios(tp.Reps, res.Reps)})
				}
			}
		}
	}
	return out
}

// restateSummary is the Restate fields of the summary line: the runs/s
// ratios of the default mode at every concurrency, its p50 ratio at the
// lowest, and the sync_always runs/s ratio at the highest, under two
// names: vs_restate_sync_always_c<n> (its first name) and
// vs_restate_equal_durability_c<n>, since with sync_always agentbus, like
// Restate in the benchmark (see startRestate), syncs a write to disk
// before acknowledging it.
func restateSummary(rr RestateReport, cmp []RestateComparison) string {
	if !rr.Available {
		return unavailable("vs_restate", rr.Reason, "restate-unavailable:")
	}
	var f []string
	var first, lastSync *RestateComparison
	for i, c := range cmp {
		switch c.Mode {
		case modes[0].Name:
			f = append(f, fmt.Sprintf("vs_restate_c%d=%.2fx", c.Concurrency, c.RunsPerS))
			if first == nil {
				first = &cmp[i]
			}
		case modes[1].Name:
			lastSync = &cmp[i]
		}
	}
	if first != nil {
		f = append(f, fmt.Sprintf("vs_restate_p50_c%d=%.2fx", first.Concurrency, first.P50))
	}
	if lastSync != nil {
		f = append(f, fmt.Sprintf("vs_restate_sync_always_c%d=%.2fx vs_restate_equal_durability_c%d=%.2fx",
			lastSync.Concurrency, lastSync.RunsPerS, lastSync.Concurrency, lastSync.RunsPerS))
	}
	if len(f) == 0 {
		return unavailable("vs_restate", "no agentbus throughput point at Restate's concurrencies", "")
	}
	return strings.Join(f, " ")
}

// parseReady reads setup.sh's last stdout line, "restate-ready: <binary>
// <version>".
func parseReady(out string) (bin, version string, err error) {
	line := lastLine(out)
	rest, ok := strings.CutPrefix(line, "restate-ready: ")
	f := strings.Fields(rest)
	if !ok || len(f) != 2 {
		return "", "", fmt.Errorf("restate-unavailable: setup printed %q", line)
	}
	return f[0], f[1], nil
}

// restatePeer is the installed Restate server and the built peer
// service: measure starts them for each repetition of a point.
type restatePeer struct {
	serverBin, peerBin, version string
	cleanup                     func()
}

// prepareRestate installs the Restate server (bench/restate/setup.sh) and
// finds or builds the peer service, or says why it cannot.
func prepareRestate(ctx context.Context, cfg Config) (*restatePeer, error) {
	setup := exec.CommandContext(ctx, "bash", filepath.Join(cfg.Root, "bench", "restate", "setup.sh"))
	var stdout, stderr bytes.Buffer
	setup.Stdout, setup.Stderr = &stdout, &stderr
	if err := setup.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.Index(msg, "restate-unavailable:"); i >= 0 {
			return nil, fmt.Errorf("%s", lastLine(msg[i:]))
		}
		return nil, fmt.Errorf("restate-unavailable: setup failed: %v: %s", err, lastLine(msg))
	}
	serverBin, version, err := parseReady(stdout.String())
	if err != nil {
		return nil, err
	}
	peerBin, cleanup, err := binary(ctx, cfg.BinDir, filepath.Join(cfg.Root, procs.DevModuleDir), "restatepeer", procs.DevModule+"/restatepeer")
	if err != nil {
		return &restatePeer{version: version}, fmt.Errorf("restate-unavailable: %w", err)
	}
	return &restatePeer{serverBin: serverBin, peerBin: peerBin, version: version, cleanup: cleanup}, nil
}

// measure measures one repetition of a load point on a server of its own,
// started on an empty data directory as every agentbus point starts on
// empty streams (the server keeps a finished invocation's journal for a
// day by default, so a long-lived one would grow over the benchmark):
// warm runs at concurrency conc, then conc runs in flight for l.
func (rp *restatePeer) measure(ctx context.Context, conc int, l load, warm int) (RestateResult, error) {
	rs, err := startRestate(ctx, rp.serverBin, rp.peerBin)
	if err != nil {
		return RestateResult{}, fmt.Errorf("restate-unavailable: %w", err)
	}
	defer rs.close()
	if _, _, err := rs.closedLoop(ctx, conc, fixed(warm)); err != nil {
		return RestateResult{}, fmt.Errorf("restate c%d: warm-up: %w", conc, err)
	}
	lat, elapsed, err := rs.closedLoop(ctx, conc, l)
	if err != nil {
		return RestateResult{}, fmt.Errorf("restate c%d: %w", conc, err)
	}
	return RestateResult{Concurrency: conc, Runs: len(lat), RunsPerS: float64(len(lat)) / elapsed.Seconds(), Latency: distOf(lat)}, nil
}

// restateStack is a running Restate server and the peer service.
type restateStack struct {
	dir     string
	server  *procs.Proc
	peer    *procs.Proc
	ingress string // base URL
	client  *http.Client
}

// startRestate starts the server with its data in a temporary directory
// and every listener on 127.0.0.1, then the peer, and registers the peer
// with the admin API.
//
// Durability: everything but the addresses, the data directory and the
// telemetry is the server's default (1.7.12, as `restate-server
// --dump-config` prints it with this file): one node with every role,
// default-provider = "replicated" with default-replication = 1, so the
// invocations' journal goes to this node's log server, whose
// [log-server] rocksdb-disable-wal-fsync = false: the log server fsyncs
// its RocksDB write-ahead log for every write batch before it
// acknowledges the append. A journaled step is thus on disk before the
// handler goes on: the guarantee agentbus gives with sync_always, and not
// by default (nats-server's default fsyncs every two minutes). Under
// strace -f -c on the server (2026-11-27), 50 sequential runs made 1,159
// fdatasync calls, 23 a run (a run journals about 24 entries), and 640
// runs at concurrency 64 made 3,016, 4.7 a run: appends arriving
// together share a batch and its fsync. Idle, the server makes about one
// a second.
func startRestate(ctx context.Context, serverBin, peerBin string) (*restateStack, error) {
	dir, err := os.MkdirTemp("", "agentbus-bench-restate-")
	if err != nil {
		return nil, err
	}
	rs := &restateStack{dir: dir, client: &http.Client{Timeout: time.Minute,
		Transport: &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute}}}
	ports, err := freePorts(3)
	if err != nil {
		rs.close()
		return nil, err
	}
	admin := fmt.Sprintf("127.0.0.1:%d", ports[1])
	rs.ingress = fmt.Sprintf("http://127.0.0.1:%d", ports[2])
	conf := fmt.Sprintf(`base-dir = %q
disable-telemetry = true
listen-mode = "tcp"
bind-address = "127.0.0.1:%d"
advertised-address = "http://127.0.0.1:%d/"
log-format = "compact"
[admin]
bind-address = %q
[ingress]
bind-address = "127.0.0.1:%d"
`, filepath.Join(dir, "data"), ports[0], ports[0], admin, ports[2])
	confPath := filepath.Join(dir, "restate.toml")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		rs.close()
		return nil, err
	}
	serverLog := &procs.Buffer{}
	if rs.server, err = procs.Start(procs.Spec{Name: "restate-server", Path: serverBin,
		Args: []string{"--config-file", confPath, "--no-logo"}, Env: []string{"DO_NOT_TRACK=1"}, Output: serverLog}); err != nil {
		rs.close()
		return nil, err
	}
	peerLog := &procs.Buffer{}
	if rs.peer, err = procs.Start(procs.Spec{Name: "restatepeer", Path: peerBin, Output: peerLog}); err != nil {
		rs.close()
		return nil, err
	}
	ready := func(url string) bool {
		resp, err := rs.client.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	var peerAddr string
	deadline := time.Now().Add(90 * time.Second)
	for !ready("http://"+admin+"/health") || !ready(rs.ingress+"/restate/health") || peerAddr == "" {
		if _, a, ok := strings.Cut(peerLog.String(), "restatepeer listening on "); ok {
			peerAddr = strings.TrimSpace(strings.SplitN(a, "\n", 2)[0])
		}
		switch {
		case rs.server.Exited():
			rs.close()
			return nil, fmt.Errorf("restate-server exited: %s", lastLine(serverLog.String()))
		case rs.peer.Exited():
			rs.close()
			return nil, fmt.Errorf("restatepeer exited: %s", lastLine(peerLog.String()))
		case time.Now().After(deadline) || ctx.Err() != nil:
			rs.close()
			return nil, fmt.Errorf("restate-server not ready after 90 s: %s", lastLine(serverLog.String()))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := rs.register("http://"+admin, "http://"+peerAddr); err != nil {
		rs.close()
		return nil, err
	}
	return rs, nil
}

// register adds the peer's deployment with the admin API.
func (rs *restateStack) register(admin, peer string) error {
	body, _ := json.Marshal(map[string]any{"uri": peer, "force": true})
	resp, err := rs.client.Post(admin+"/deployments", "application/json", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("register the deployment: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("register the deployment: %s: %s", resp.Status, firstLine(string(b)))
	}
	return nil
}

// run invokes Pipeline/Run on the ingress and waits for its result.
func (rs *restateStack) run(ctx context.Context, task string) (time.Duration, error) {
	body, _ := json.Marshal(map[string]string{"task": task})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rs.ingress+"/Pipeline/Run", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := rs.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	took := time.Since(start)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("Pipeline/Run: %s: %s", resp.Status, firstLine(string(b)))
	}
	var out struct {
		Steps      int `json:"steps"`
		ModelCalls int `json:"model_calls"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.Steps != pipeline.Stages || out.ModelCalls != 12 {
		return 0, fmt.Errorf("Pipeline/Run: unexpected result %s", firstLine(string(b)))
	}
	return took, nil
}

// closedLoop keeps conc runs in flight for l.
func (rs *restateStack) closedLoop(ctx context.Context, conc int, l load) ([]time.Duration, time.Duration, error) {
	return keepInFlight(conc, l, func(i int) (time.Duration, error) {
		return rs.run(ctx, fmt.Sprintf("find outlets for pitch #%d", i))
	})
}

func (rs *restateStack) close() {
	for _, p := range []*procs.Proc{rs.peer, rs.server} {
		if p != nil {
			p.Stop(syscall.SIGTERM, 15*time.Second)
		}
	}
	os.RemoveAll(rs.dir)
}

// freePorts returns n loopback ports that were free a moment ago (the
// Restate server takes its ports from its configuration).
func freePorts(n int) ([]int, error) {
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
