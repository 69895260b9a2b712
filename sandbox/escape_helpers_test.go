package sandbox

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mustWrite writes a small input file into task and returns its id.
func mustWrite(t *testing.T, task *Task) string {
	t.Helper()
	id, err := task.WriteTemp([]byte(menu))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// outputLines parses "name: outcome" lines printed by a script.
func outputLines(out []byte) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if k, v, ok := strings.Cut(l, ": "); ok {
			m[k] = v
		}
	}
	return m
}

// mustSucceed fails t unless the script ran to a clean exit.
func mustSucceed(t *testing.T, res Result, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("script failed: %v\nstdout: %s\nstderr: %s", err, res.Output, res.Stderr)
	}
}

// run executes script against a small input in a fresh task of s.
func run(t *testing.T, s *Sandbox, timeout time.Duration, script string) (*Task, string, Result, error) {
	t.Helper()
	task, id := newTask(t, s, menu)
	task.Timeout = timeout
	start := time.Now()
	res, err := s.ExecPython(context.Background(), task, script, id)
	if elapsed := time.Since(start); elapsed > timeout+5*time.Second {
		t.Errorf("call returned after %s, limit %s", elapsed, timeout)
	}
	return task, id, res, err
}

// hostProcessCount counts the processes visible in the host's /proc.
func hostProcessCount(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			n++
		}
	}
	return n
}

// waitNoProcess fails t if, shortly after a call, some host process still
// has token in its command line.
func waitNoProcess(t *testing.T, token string) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		pids := processesWith(token)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, p := range pids {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
			t.Fatalf("processes %v with %q survived the call", pids, token)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func processesWith(token string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(token)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func firstLine(out []byte, prefix string) string {
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}
