package sandbox

import (
	"bufio"
	"context"
	"encoding/json" // gojq takes encoding/json's Number, not v1's
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/itchyny/gojq"
)

// jq helper exit statuses, as jq(1) uses them.
const (
	jqExitInput   = 2 // the input is not JSON
	jqExitCompile = 3 // the expression does not parse or compile
	jqExitRuntime = 5 // the expression raised an error
)

// jqMaxStack bounds the helper's goroutine stacks: deeply nested values
// (built by e.g. reduce range(1e7) as $i (null; [.])) make gojq's encoder and
// comparisons recurse; the helper then dies instead of growing to 1 GB.
const jqMaxStack = 64 << 20

// jqSpec tells the jq helper its limits.
type jqSpec struct {
	Limits limits `json:"limits"`
}

// ExecJQ evaluates the jq expression expr (gojq) against the temp file fileID,
// which holds one or more JSON values, and returns each result as compact
// JSON on its own line. The same time limit and output cap as ExecPython
// apply, with the same errors.
//
// gojq runs in a helper process (this binary re-executed) rather than in the
// caller's process: gojq recurses over nested values in Go, so a hostile
// expression can overflow the stack, a fatal error no recover catches, or
// exhaust memory. The helper runs with an empty environment ($ENV and env are
// empty; gojq offers no file, network or module access without options we do
// not set), as the script uid, under RLIMIT_AS/CPU/NOFILE, and is killed at
// the time limit.
func (s *Sandbox) ExecJQ(ctx context.Context, t *Task, expr string, fileID string) (Result, error) {
	res := Result{ScriptHash: hashString(expr), ExitCode: -1}
	if err := checkScript(expr); err != nil {
		return res, err
	}
	f, err := t.openFile(fileID)
	if err != nil {
		return res, err
	}
	data, err := io.ReadAll(f)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return res, fmt.Errorf("%w: read input: %w", ErrSetup, err)
	}
	res.InputRows = countRows(data)
	spec, err := json.Marshal(jqSpec{Limits: s.limits})
	if err != nil {
		f.Close()
		return res, err
	}
	cmd := s.jqCommand(string(spec))
	cmd.Stdin = strings.NewReader(expr)
	cmd.ExtraFiles = []*os.File{f} // fd 3 in the helper
	err = s.run(ctx, t.timeout(), cmd, &res, describeJQ)
	return res, err
}

// describeJQ picks the helper's error line: a Go runtime fatal error (out of
// memory, stack overflow) if it crashed, else its first line.
func describeJQ(stderr []byte) string {
	lines := strings.Split(strings.TrimSpace(string(stderr)), "\n")
	for _, l := range lines {
		if strings.HasPrefix(l, "fatal error:") {
			return clip("jq: " + l)
		}
	}
	return clip(lines[0])
}

// jqMain is the jq helper: expression on stdin, input on fd 3, results on
// stdout. It returns the exit status.
func jqMain(raw string) int {
	var sp jqSpec
	if err := json.Unmarshal([]byte(raw), &sp); err != nil {
		fmt.Fprintf(os.Stderr, "jq: bad spec: %v\n", err)
		return jqExitCompile
	}
	if err := jqLimits(sp.Limits); err != nil {
		fmt.Fprintf(os.Stderr, "jq: limits: %v\n", err)
		return jqExitCompile
	}
	if err := loadSeccomp(); err != nil {
		fmt.Fprintf(os.Stderr, "jq: %v\n", err)
		return jqExitCompile
	}
	debug.SetMaxStack(jqMaxStack)
	debug.SetMemoryLimit(sp.Limits.AS / 2) // collect hard before RLIMIT_AS bites

	expr, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintf(os.Stderr, "jq: read expression: %v\n", err)
		return jqExitCompile
	}
	query, err := gojq.Parse(string(expr))
	if err != nil {
		fmt.Fprintf(os.Stderr, "jq: compile error: %v\n", err)
		return jqExitCompile
	}
	// No options: no environment, no modules, no input/inputs.
	code, err := gojq.Compile(query)
	if err != nil {
		fmt.Fprintf(os.Stderr, "jq: compile error: %v\n", err)
		return jqExitCompile
	}
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	defer out.Flush()
	dec := json.NewDecoder(bufio.NewReaderSize(os.NewFile(3, "input"), 64<<10))
	dec.UseNumber()
	for {
		var v any
		if err := dec.Decode(&v); errors.Is(err, io.EOF) {
			return 0
		} else if err != nil {
			fmt.Fprintf(os.Stderr, "jq: invalid JSON input: %v\n", err)
			return jqExitInput
		}
		if status := jqRun(code, v, out); status != 0 {
			return status
		}
	}
}

// jqRun writes every result of code on v to out, one compact JSON per line.
func jqRun(code *gojq.Code, v any, out *bufio.Writer) int {
	iter := code.Run(v)
	for {
		r, ok := iter.Next()
		if !ok {
			return 0
		}
		if err, ok := r.(error); ok {
			var halt *gojq.HaltError
			if errors.As(err, &halt) && halt.Value() == nil {
				return halt.ExitCode()
			}
			out.Flush()
			fmt.Fprintf(os.Stderr, "jq: error: %v\n", err)
			return jqExitRuntime
		}
		b, err := gojq.Marshal(r)
		if err != nil {
			fmt.Fprintf(os.Stderr, "jq: error: %v\n", err)
			return jqExitRuntime
		}
		out.Write(b)
		if err := out.WriteByte('\n'); err != nil {
			return jqExitRuntime // stdout closed: the parent stopped reading
		}
	}
}
