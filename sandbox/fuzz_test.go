//go:build linux

package sandbox

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
)

// FuzzJQ: the expressions the executor's model writes reach the jq helper
// as they are. Whatever the expression and the file id, the call answers
// with results (each one JSON value on its own line) or one of the
// sandbox's script errors, within its time limit; it never fails the
// sandbox itself or reads a file outside the task.
func FuzzJQ(f *testing.F) {
	s := newSandbox(f, IsolationNamespaces, nil)
	task, id := newTask(f, s, menu)
	task.Timeout = 3 * time.Second
	for _, seed := range []struct{ expr, file string }{
		{`[.[] | .category]`, id}, {`.[] | select(.price > 5) | .name`, id}, {`def f: f; f`, id},
		{`[range(1e9)]`, id}, {`"x" * 100000000`, id}, {`.`, "../" + id}, {`.`, "/etc/passwd"},
		{`input`, id}, {`$ENV`, id}, {`env`, id}, {`[limit(3; repeat(.))]`, id}, {`.[`, id},
	} {
		f.Add(seed.expr, seed.file)
	}
	f.Fuzz(func(t *testing.T, expr, file string) {
		start := time.Now()
		res, err := s.ExecJQ(context.Background(), task, expr, file)
		if elapsed := time.Since(start); elapsed > task.Timeout+5*time.Second {
			t.Fatalf("answered after %s (limit %s)", elapsed, task.Timeout)
		}
		if err != nil {
			for _, known := range []error{ErrScriptFailed, ErrTimeout, ErrOversizedOutput, ErrInvalidFileID, ErrInvalidScript} {
				if errors.Is(err, known) {
					return
				}
			}
			t.Fatalf("expression %q, file %q: %v", expr, file, err)
		}
		if file != id {
			t.Fatalf("read file %q (the task holds only %q): %s", file, id, res.Output)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(res.Output)), "\n") {
			if line != "" && !json.Valid([]byte(line)) {
				t.Fatalf("expression %q: a result that is not JSON: %q", expr, line)
			}
		}
	})
}

// FuzzReadLines: the read_lines tool's file id and window come from the
// model. It reads within the task's files or refuses.
func FuzzReadLines(f *testing.F) {
	s := newSandbox(f, IsolationNamespaces, nil)
	task, id := newTask(f, s, menu)
	f.Add(id, 0, 2)
	f.Add("../"+id, 0, 1)
	f.Add(id+"/..", 1, 1)
	f.Add("/proc/self/environ", 0, 10)
	f.Add(id, -1, 1<<30)
	f.Fuzz(func(t *testing.T, file string, start, n int) {
		lines, err := task.ReadLines(file, start, n)
		if err != nil {
			if !errors.Is(err, ErrInvalidFileID) && !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("file %q [%d,+%d]: %v", file, start, n, err)
			}
			return
		}
		if file != id {
			t.Fatalf("read file %q (the task holds only %q)", file, id)
		}
		for _, l := range lines {
			if !strings.Contains(menu, l) {
				t.Fatalf("a line not in the file: %q", l)
			}
		}
	})
}
