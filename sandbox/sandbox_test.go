package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
)

// isolatedModes are the mechanisms every isolation test runs under. Both
// must work on the test machine (deploy/sandbox/setup.sh installs bwrap);
// a mode that does not work fails the tests, it is never skipped.
var isolatedModes = []string{IsolationBwrap, IsolationNamespaces}

const secretEnv = "AGENTBUS_TEST_SECRET"

var secretValue = "s3cr3t-" + randomHex(8)

func TestMain(m *testing.M) {
	os.Setenv(secretEnv, secretValue)
	os.Exit(m.Run())
}

// testRoot returns a fresh Root below os.TempDir() whose ancestors the
// script uid can search (t.TempDir's are 0700).
func testRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "agentbus-sandbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = removeTree(dir) })
	return filepath.Join(dir, "root")
}

func newSandbox(t testing.TB, mode string, edit func(*Config)) *Sandbox {
	t.Helper()
	cfg := Config{Root: testRoot(t), Isolation: mode}
	if edit != nil {
		edit(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%s): %v", mode, err)
	}
	if s.Isolation() != mode {
		t.Fatalf("Isolation() = %q, want %q", s.Isolation(), mode)
	}
	return s
}

func newTask(t testing.TB, s *Sandbox, data string) (*Task, string) {
	t.Helper()
	task, err := s.NewTask(t.Name())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = task.Close() })
	id, err := task.WriteTemp([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	return task, id
}

const menu = `[{"item_id":1,"name":"Soup","category":"starter","price":4.5},
{"item_id":2,"name":"Steak","category":"main","price":21},
{"item_id":3,"name":"Cake","category":"dessert","price":6}]`

const extractScript = `import json
with open(input_file) as f:
    data = json.load(f)
result = [{'item_id': x['item_id'], 'category': x['category']} for x in data]
print(json.dumps(result))
`

func TestExecPythonExtractsFields(t *testing.T) {
	for _, mode := range isolatedModes {
		t.Run(mode, func(t *testing.T) {
			s := newSandbox(t, mode, nil)
			task, id := newTask(t, s, menu)
			res, err := s.ExecPython(context.Background(), task, extractScript, id)
			if err != nil {
				t.Fatalf("ExecPython: %v (stderr %s)", err, res.Stderr)
			}
			var got []map[string]any
			if err := json.Unmarshal(res.Output, &got); err != nil {
				t.Fatalf("output %q: %v", res.Output, err)
			}
			if len(got) != 3 || got[1]["category"] != "main" || len(got[1]) != 2 {
				t.Fatalf("output = %v", got)
			}
			sum := sha256.Sum256([]byte(extractScript))
			if res.ScriptHash != hex.EncodeToString(sum[:]) {
				t.Errorf("ScriptHash = %s", res.ScriptHash)
			}
			if res.ExitCode != 0 || res.Killed || res.Reason != "" || res.Duration <= 0 {
				t.Errorf("result = %+v", res)
			}
			if res.InputRows != 3 || res.OutputRows != 3 {
				t.Errorf("rows in/out = %d/%d, want 3/3", res.InputRows, res.OutputRows)
			}
		})
	}
}

func TestExecPythonScriptError(t *testing.T) {
	s := newSandbox(t, IsolationBwrap, nil)
	task, id := newTask(t, s, menu)
	res, err := s.ExecPython(context.Background(), task, "x = 1\nraise ValueError('boom')\n", id)
	if !errors.Is(err, ErrScriptFailed) || res.Reason != ReasonExitStatus || res.ExitCode != 1 {
		t.Fatalf("err = %v, result = %+v", err, res)
	}
	if !strings.Contains(err.Error(), "ValueError: boom") ||
		!strings.Contains(string(res.Stderr), "raise ValueError('boom')") {
		t.Fatalf("err = %v, stderr = %s", err, res.Stderr)
	}
	if _, err := s.ExecPython(context.Background(), task, "  \n", id); !errors.Is(err, ErrInvalidScript) {
		t.Fatalf("empty script: %v", err)
	}
}

func TestReadLines(t *testing.T) {
	s := newSandbox(t, IsolationBwrap, nil)
	var b strings.Builder
	for i := range 50 {
		b.WriteString(strings.Repeat("x", i) + "\n")
	}
	b.WriteString(strings.Repeat("y", 10000)) // long last line, no newline
	task, id := newTask(t, s, b.String())

	lines, err := task.ReadLines(id, 0, 20)
	if err != nil || len(lines) != 20 || lines[0] != "" || lines[19] != strings.Repeat("x", 19) {
		t.Fatalf("ReadLines(0, 20) = %d lines, %v", len(lines), err)
	}
	lines, err = task.ReadLines(id, 45, 20)
	if err != nil || len(lines) != 6 || lines[0] != strings.Repeat("x", 45) {
		t.Fatalf("ReadLines(45, 20) = %q, %v", lines, err)
	}
	if last := lines[5]; !strings.HasPrefix(last, strings.Repeat("y", maxLineBytes)) || !strings.HasSuffix(last, "… [+5904 bytes]") {
		t.Fatalf("long line not cut: %d bytes, suffix %q", len(last), last[len(last)-20:])
	}
	if lines, err := task.ReadLines(id, 100, 5); err != nil || len(lines) != 0 {
		t.Fatalf("ReadLines past the end = %q, %v", lines, err)
	}
	if _, err := task.ReadLines(id, -1, 5); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("negative start: %v", err)
	}
	if _, err := task.ReadLines(id, 0, maxReadLines+1); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("too many lines: %v", err)
	}
}

func TestFileIDPathTricksRejected(t *testing.T) {
	s := newSandbox(t, IsolationBwrap, nil)
	task, id := newTask(t, s, menu)
	ctx := context.Background()

	// A link and a FIFO named like real ids, as a script could leave them.
	link, fifo := "f_00000000000000aa", "f_00000000000000bb"
	if err := os.Symlink("/etc/passwd", filepath.Join(task.Dir, link)); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(task.Dir, fifo), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := []string{"", "../" + filepath.Base(task.Dir) + "/" + id, "/etc/passwd", "..", ".", id + "/", id + "/../" + id,
		"f_../../etc/pass", "F_0123456789ABCDEF", "f_0123456789abcdeg", "f_0123456789abcdef0", "f_0123456789abcde\x00", link, fifo}
	for _, b := range bad {
		if _, err := task.ReadLines(b, 0, 1); !errors.Is(err, ErrInvalidFileID) {
			t.Errorf("ReadLines(%q): %v", b, err)
		}
		if _, err := s.ExecPython(ctx, task, "print(1)", b); !errors.Is(err, ErrInvalidFileID) {
			t.Errorf("ExecPython(%q): %v", b, err)
		}
		if _, err := s.ExecJQ(ctx, task, ".", b); !errors.Is(err, ErrInvalidFileID) {
			t.Errorf("ExecJQ(%q): %v", b, err)
		}
	}
	if _, err := task.ReadLines("f_0123456789abcdef", 0, 1); !errors.Is(err, ErrInvalidFileID) {
		t.Errorf("missing file: %v", err)
	}
}

func TestExecJQ(t *testing.T) {
	s := newSandbox(t, IsolationBwrap, nil)
	task, id := newTask(t, s, menu)
	ctx := context.Background()

	res, err := s.ExecJQ(ctx, task, `map({item_id, category})`, id)
	if err != nil {
		t.Fatalf("ExecJQ: %v (%s)", err, res.Stderr)
	}
	want := `[{"category":"starter","item_id":1},{"category":"main","item_id":2},{"category":"dessert","item_id":3}]` + "\n"
	if string(res.Output) != want || res.InputRows != 3 || res.OutputRows != 3 || res.ExitCode != 0 {
		t.Fatalf("result = %+v, output %s", res, res.Output)
	}
	if res.ScriptHash != hashString(`map({item_id, category})`) {
		t.Errorf("ScriptHash = %s", res.ScriptHash)
	}

	res, err = s.ExecJQ(ctx, task, `.[] | select(.price > 5) | .name`, id)
	if err != nil || string(res.Output) != "\"Steak\"\n\"Cake\"\n" || res.OutputRows != 2 {
		t.Fatalf("stream: %q, %v", res.Output, err)
	}
	// Big numbers keep their digits.
	bigTask, big := newTask(t, s, `{"n": 12345678901234567890123}`)
	if res, err = s.ExecJQ(ctx, bigTask, `.n`, big); err != nil || string(res.Output) != "12345678901234567890123\n" {
		t.Fatalf("big number: %q, %v", res.Output, err)
	}
	// No host environment, no inputs, no modules.
	if res, err = s.ExecJQ(ctx, task, `[$ENV, env] | map(length)`, id); err != nil || string(res.Output) != "[0,0]\n" {
		t.Fatalf("environment visible: %q, %v", res.Output, err)
	}
	for _, expr := range []string{`input`, `[inputs]`, `import "x" as x; .`, `include "x"; .`, `.[`} {
		if res, err := s.ExecJQ(ctx, task, expr, id); !errors.Is(err, ErrScriptFailed) {
			t.Errorf("%s: %v, %q", expr, err, res.Output)
		}
	}
	res, err = s.ExecJQ(ctx, task, `error("nope")`, id)
	if !errors.Is(err, ErrScriptFailed) || res.ExitCode != jqExitRuntime || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("error(): %v %+v", err, res)
	}
}

func TestExecJQLimits(t *testing.T) {
	s := newSandbox(t, IsolationBwrap, func(c *Config) { c.OutputCap = 10000 })
	task, id := newTask(t, s, menu)
	task.Timeout = 2 * time.Second
	ctx := context.Background()

	res, err := s.ExecJQ(ctx, task, `range(1e9)`, id)
	if !errors.Is(err, ErrOversizedOutput) || res.Reason != ReasonOversizedOutput || len(res.Output) != 10000 || !res.Killed {
		t.Fatalf("range(1e9): %v, %d bytes, %+v", err, len(res.Output), res)
	}
	start := time.Now()
	res, err = s.ExecJQ(ctx, task, `def f: f; f`, id)
	if !errors.Is(err, ErrTimeout) || res.Reason != ReasonTimeout || time.Since(start) > 5*time.Second {
		t.Fatalf("def f: f; f: %v after %s", err, time.Since(start))
	}
	// Memory: killed by the timeout or by RLIMIT_AS, whichever comes first.
	start = time.Now()
	res, err = s.ExecJQ(ctx, task, `[range(1e9)] | length`, id)
	if !errors.Is(err, ErrTimeout) && !errors.Is(err, ErrScriptFailed) || time.Since(start) > 5*time.Second {
		t.Fatalf("[range(1e9)]: %v after %s", err, time.Since(start))
	}
	t.Logf("[range(1e9)]: %v", err)
	// Deep nesting overflows gojq's recursion: in-process this would kill
	// the test binary; the helper dies instead.
	task.Timeout = 20 * time.Second
	res, err = s.ExecJQ(ctx, task, `reduce range(3000000) as $i (null; [.]) | tojson | length`, id)
	if !errors.Is(err, ErrScriptFailed) && !errors.Is(err, ErrTimeout) {
		t.Fatalf("deep nesting: %v", err)
	}
	t.Logf("deep nesting: %v after %s", err, res.Duration)
}

func TestSweep(t *testing.T) {
	s := newSandbox(t, IsolationBwrap, nil)
	old, _ := newTask(t, s, "x")
	fresh, _ := newTask(t, s, "x")
	other := filepath.Join(s.Config().Root, "not-a-task-dir")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-2 * time.Hour)
	for _, d := range []string{old.Dir, other} {
		if err := os.Chtimes(d, past, past); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.Sweep(0)
	if err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v", n, err)
	}
	for dir, want := range map[string]bool{old.Dir: false, fresh.Dir: true, other: true} {
		if _, err := os.Stat(dir); (err == nil) != want {
			t.Errorf("%s exists = %v, want %v", dir, err == nil, want)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.RunSweeper(ctx, time.Millisecond, time.Nanosecond, nil) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat(fresh.Dir); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("RunSweeper did not remove the task dir")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("RunSweeper = %v", err)
	}
}

func TestCloseWipes(t *testing.T) {
	s := newSandbox(t, IsolationBwrap, nil)
	task, id := newTask(t, s, menu)
	// A script may leave a tree behind, including a dir without permissions.
	if _, err := s.ExecPython(context.Background(), task,
		"import os\nos.makedirs('a/b')\nopen('a/b/c','w').write('x')\nos.chmod('a', 0)\n", id); err != nil {
		t.Fatal(err)
	}
	if err := task.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(task.Dir); !os.IsNotExist(err) {
		t.Fatalf("task dir still there: %v", err)
	}
	if err := task.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := task.WriteTemp([]byte("x")); !errors.Is(err, ErrTaskClosed) {
		t.Fatalf("WriteTemp after Close: %v", err)
	}
	if _, err := task.ReadLines(id, 0, 1); !errors.Is(err, ErrTaskClosed) {
		t.Fatalf("ReadLines after Close: %v", err)
	}
}

func TestTaskDirs(t *testing.T) {
	s := newSandbox(t, IsolationBwrap, nil)
	task, err := s.NewTask("../../etc/x y")
	if err != nil {
		t.Fatal(err)
	}
	defer task.Close()
	if filepath.Dir(task.Dir) != s.Config().Root || !taskDirPattern.MatchString(filepath.Base(task.Dir)) {
		t.Fatalf("task dir %s", task.Dir)
	}
	fi, err := os.Stat(task.Dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("task dir mode %v, %v", fi.Mode(), err)
	}
}

func TestNoIsolationFailsClosed(t *testing.T) {
	_, err := New(Config{Root: testRoot(t), Isolation: IsolationNone})
	if !errors.Is(err, ErrNoIsolation) {
		t.Fatalf("New(none) without the dev flag = %v, want ErrNoIsolation", err)
	}
	s, err := New(Config{Root: testRoot(t), Isolation: IsolationNone, AllowUnsafeNoIsolation: true})
	if err != nil || s.Isolation() != IsolationNone {
		t.Fatalf("New(none, dev flag) = %v", err)
	}
	task, id := newTask(t, s, menu)
	res, err := s.ExecPython(context.Background(), task, extractScript, id)
	if err != nil || res.OutputRows != 3 {
		t.Fatalf("unconfined run: %v %s", err, res.Stderr)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want error
	}{
		{Config{}, nil},
		{Config{Root: "relative"}, ErrInvalidConfig},
		{Config{Isolation: "chroot"}, ErrInvalidConfig},
		{Config{MaxProcs: 1}, ErrInvalidConfig},
		{Config{MemoryBytes: 1 << 20}, ErrInvalidConfig},
		{Config{Timeout: -time.Second}, ErrInvalidConfig},
		{Config{Isolation: IsolationNone}, ErrNoIsolation},
		{Config{Isolation: IsolationNone, AllowUnsafeNoIsolation: true}, nil},
	} {
		if err := tc.cfg.Validate(); !errors.Is(err, tc.want) && !(err == nil && tc.want == nil) {
			t.Errorf("Validate(%+v) = %v, want %v", tc.cfg, err, tc.want)
		}
	}
}

func TestCountRows(t *testing.T) {
	for in, want := range map[string]int{
		"":                0,
		"a":               1,
		"a\nb\n":          2,
		"a\nb":            2,
		"[1,2,3]\n":       3,
		" [ ] ":           0,
		`[{"a":[1,2]},3]`: 2,
		"[1,2]\n[3]\n":    2, // two values: lines
		"[1,2":            1,
		"{\"a\":1}\n":     1,
	} {
		if got := countRows([]byte(in)); got != want {
			t.Errorf("countRows(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestBenchStartToResult(t *testing.T) {
	s := newSandbox(t, IsolationBwrap, nil)
	py, jq, err := BenchStartToResult(context.Background(), s, 3)
	if err != nil || py <= 0 || jq <= 0 {
		t.Fatalf("BenchStartToResult = %s, %s, %v", py, jq, err)
	}
	t.Logf("p50 start-to-result: python %s, jq %s", py, jq)
}

// BenchmarkStartToResult reports the median start-to-result latency of a
// trivial script and a trivial jq expression under the default isolation.
func BenchmarkStartToResult(b *testing.B) {
	root, err := os.MkdirTemp("", "agentbus-sandbox-bench-")
	if err != nil {
		b.Fatal(err)
	}
	os.Chmod(root, 0o711)
	defer removeTree(root)
	s, err := New(Config{Root: filepath.Join(root, "root")})
	if err != nil {
		b.Fatal(err)
	}
	py, jq, err := BenchStartToResult(context.Background(), s, b.N)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(py.Microseconds())/1000, "python-p50-ms")
	b.ReportMetric(float64(jq.Microseconds())/1000, "jq-p50-ms")
	b.ReportMetric(0, "ns/op")
}
