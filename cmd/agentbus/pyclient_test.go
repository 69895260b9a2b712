package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
)

// pyclients is the venv deploy/pyclients/setup.sh makes (make test runs
// it); a test that needs it fails when it is missing.
func pyclients(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: needs the Python packages deploy/pyclients/setup.sh installs")
	}
	python, err := filepath.Abs(filepath.Join("..", "..", ".cache", "pyclients", "bin", "python"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("the Python client packages are not installed (run deploy/pyclients/setup.sh, which make test runs): %v", err)
	}
	return python
}

// runPython runs a testdata script with args and returns what it printed.
func runPython(t *testing.T, ctx context.Context, env []string, python, script string, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(ctx, python, append([]string{filepath.Join("testdata", script)}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("%s: %v:\n%s", script, err, ee.Stderr)
		}
		t.Fatal(err)
	}
	return out
}

// TestPythonClient: agentbus's Python client (clients/python) against two
// all-in-ones: a run and its plan; typed errors with the stable codes; a
// stream whose connection the test cuts once resumes by itself with no
// chunk lost or repeated; the async client; and a run parked at a gate
// (a network call, gated by default) decided and followed to its end. The
// package builds as a wheel (pip-installable).
func TestPythonClient(t *testing.T) {
	python := pyclients(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	s := startStack(t)
	gs, _ := startStackWith(t, networkOutlets)
	root, err := filepath.Abs(filepath.Join("..", "..", "clients", "python"))
	if err != nil {
		t.Fatal(err)
	}
	out := runPython(t, ctx, []string{"PYTHONPATH=" + root, "PYTHONDONTWRITEBYTECODE=1"}, python, "pyclient_check.py",
		"http://"+s.IngressAddr, "http://"+gs.IngressAddr, demoTask)
	type code struct {
		Status int    `json:"status"`
		Code   string `json:"code"`
	}
	var got struct {
		Sync struct {
			Code, Response string
		} `json:"sync"`
		PlanStatus string `json:"plan_status"`
		Bad        code   `json:"bad"`
		Missing    code   `json:"missing"`
		Stream     struct {
			Resumes    int    `json:"resumes"`
			Chunks     int    `json:"chunks"`
			IDsSorted  bool   `json:"ids_sorted"`
			IDsUnique  bool   `json:"ids_unique"`
			Answer     string `json:"answer"`
			Last, Code string
		} `json:"stream"`
		Async struct {
			Code         string `json:"code"`
			StreamChunks int    `json:"stream_chunks"`
			StreamCode   string `json:"stream_code"`
		} `json:"async"`
		Gated struct {
			Parked   bool   `json:"parked"`
			Status   string `json:"status"`
			Gates    int    `json:"gates"`
			Decision string `json:"decision"`
			Final    string `json:"final"`
			Code     string `json:"code"`
		} `json:"gated"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := expectedRanking(t, s.SkillsURL, "demo")
	assertRanked(t, got.Sync.Response, want)
	assertRanked(t, got.Stream.Answer, want)
	switch {
	case got.Sync.Code != "SUCCESS" || got.PlanStatus != "complete":
		t.Fatalf("sync run: %s", out)
	case got.Bad != code{400, "invalid_request"} || got.Missing != code{404, "not_found"}:
		t.Fatalf("typed errors: %s", out)
	case got.Stream.Resumes != 1 || got.Stream.Chunks < 5 || !got.Stream.IDsSorted ||
		!got.Stream.IDsUnique || got.Stream.Last != "result" || got.Stream.Code != "SUCCESS":
		t.Fatalf("resumed stream: %s", out)
	case got.Async.Code != "SUCCESS" || got.Async.StreamChunks < 5 || got.Async.StreamCode != "SUCCESS":
		t.Fatalf("async client: %s", out)
	case !got.Gated.Parked || got.Gated.Status != "awaiting_gate" || got.Gated.Gates != 1 || got.Gated.Decision == "" ||
		got.Gated.Final != "result" || got.Gated.Code != "SUCCESS":
		t.Fatalf("gated run: %s", out)
	}

	// Built from a copy: a build writes build/ and *.egg-info beside the
	// sources.
	src, wheels := filepath.Join(t.TempDir(), "python"), t.TempDir()
	if err := os.CopyFS(src, os.DirFS(root)); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, python, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", wheels, src)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pip wheel clients/python: %v\n%s", err, b)
	}
	if m, _ := filepath.Glob(filepath.Join(wheels, "agentbus_client-*.whl")); len(m) != 1 || !strings.HasSuffix(m[0], "-py3-none-any.whl") {
		t.Fatalf("wheels %v", m)
	}
}
