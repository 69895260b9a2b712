package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Result describes one ExecPython or ExecJQ call. It is filled in, as far as
// the call got, even when the call returns an error, so it can always be
// audited (python_script.executed).
type Result struct {
	// Output is the script's stdout: at most Config.OutputCap bytes.
	Output []byte
	// Stderr is the script's stderr (at most 64 KiB), for error messages.
	Stderr []byte
	// ExitCode is the exit status; 128+n when killed by signal n; -1 if the
	// script did not start.
	ExitCode int
	// Duration is the wall time from start to exit.
	Duration time.Duration
	// ScriptHash is the sha256 (hex) of the script or jq expression as given.
	ScriptHash string
	// InputRows and OutputRows count the input file and the output: the
	// number of elements when the whole content is one JSON array, else the
	// number of lines (a last line without "\n" counts).
	InputRows, OutputRows int
	// Killed is set when the sandbox killed the script (time limit, output
	// cap, cancellation) or a signal ended it.
	Killed bool
	// Reason is empty on success, else one of the Reason* constants.
	Reason string
}

// pythonBootstrap runs the script read from stdin as __main__, with
// input_file (and sys.argv[1]) set to the input path. It prints tracebacks
// itself, from linecache, so they show the failing script lines.
const pythonBootstrap = `import sys, linecache, traceback
src = sys.stdin.buffer.read().decode("utf-8", "replace")
sys.stdin.close()
sys.argv = ["script.py", sys.argv[1]]
linecache.cache["script.py"] = (len(src), None, src.splitlines(True), "script.py")
try:
    exec(compile(src, "script.py", "exec"), {"__name__": "__main__", "__builtins__": __builtins__, "input_file": sys.argv[1]})
except SystemExit:
    raise
except BaseException as e:
    traceback.print_exception(type(e), e, e.__traceback__.tb_next)
    sys.exit(1)
`

// ExecPython runs script with python3 in the sandbox against the temp file
// fileID: the file's path is sys.argv[1] (and the global input_file), the
// working directory is the task dir, stdout is the result. It returns
// ErrTimeout, ErrOversizedOutput, ErrScriptFailed (non-zero exit) or ctx's
// error, always with the Result filled in.
func (s *Sandbox) ExecPython(ctx context.Context, t *Task, script string, fileID string) (Result, error) {
	res := Result{ScriptHash: hashString(script), ExitCode: -1}
	if err := checkScript(script); err != nil {
		return res, err
	}
	data, err := t.readFile(fileID)
	if err != nil {
		return res, err
	}
	res.InputRows = countRows(data)

	dir, input := sandboxTaskDir, filepath.Join(sandboxTaskDir, fileID)
	if s.mode == IsolationNone {
		dir, input = t.Dir, filepath.Join(t.Dir, fileID)
	}
	argv := []string{s.py.exe, "-I", "-B", "-c", pythonBootstrap, input}
	cmd, err := s.pythonCommand(t, dir, argv)
	if err != nil {
		return res, err
	}
	cmd.Stdin = strings.NewReader(script)
	err = s.run(ctx, t.timeout(), cmd, &res, lastLine)
	return res, err
}

// sandboxEnv is the whole environment of a script: nothing of the host's.
func sandboxEnv(dir string) []string {
	return []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"LANG=C.UTF-8",
		"LC_ALL=C.UTF-8",
		"HOME=" + dir,
		"TMPDIR=/tmp",
		"TZ=UTC",
		"PYTHONDONTWRITEBYTECODE=1",
		"PYTHONIOENCODING=utf-8",
	}
}

// run starts cmd in its own session, enforces the time limit and the
// output cap by killing the group (which takes the sandbox's PID namespace
// with it), and fills in res. describe picks the error message from stderr.
func (s *Sandbox) run(ctx context.Context, timeout time.Duration, cmd *exec.Cmd, res *Result, describe func([]byte) string) error {
	errTimeout := fmt.Errorf("%w after %s", ErrTimeout, timeout)
	runCtx, cancelTimeout := context.WithTimeoutCause(ctx, timeout, errTimeout)
	defer cancelTimeout()
	runCtx, cancel := context.WithCancelCause(runCtx)
	defer cancel(nil)

	stdout := &capWriter{max: s.cfg.OutputCap, onOver: func() { cancel(ErrOversizedOutput) }}
	stderr := &capWriter{max: stderrCap}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = 2 * time.Second
	setProcAttrs(cmd)

	closeInheritedFiles()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		closeExtraFiles(cmd)
		return fmt.Errorf("%w: start: %w", ErrSetup, err)
	}
	closeExtraFiles(cmd)
	pid := cmd.Process.Pid
	stop := context.AfterFunc(runCtx, func() {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = cmd.Process.Kill()
	})
	waitErr := cmd.Wait()
	stop()
	res.Duration = time.Since(start)
	res.Output, res.Stderr = stdout.Bytes(), stderr.Bytes()
	res.OutputRows = countRows(res.Output)
	res.ExitCode = exitCode(cmd.ProcessState)
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.Killed = true
	}

	cause := context.Cause(runCtx)
	switch {
	case stdout.Over():
		res.Killed, res.Reason = true, ReasonOversizedOutput
		return fmt.Errorf("%w: more than %d bytes", ErrOversizedOutput, s.cfg.OutputCap)
	case errors.Is(cause, errTimeout):
		res.Killed, res.Reason = true, ReasonTimeout
		return errTimeout
	case ctx.Err() != nil:
		res.Killed, res.Reason = true, ReasonCanceled
		return context.Cause(ctx)
	case res.ExitCode != 0:
		res.Reason = ReasonExitStatus
		return fmt.Errorf("%w: exit status %d: %s", ErrScriptFailed, res.ExitCode, describe(res.Stderr))
	case waitErr != nil:
		return fmt.Errorf("%w: %w", ErrSetup, waitErr)
	}
	return nil
}

// exitCode maps a process state to an exit status, 128+n for signal n.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// closeExtraFiles closes the parent's copies of the files passed to the child.
func closeExtraFiles(cmd *exec.Cmd) {
	for _, f := range cmd.ExtraFiles {
		if f != nil {
			f.Close()
		}
	}
}

// capWriter keeps the first max bytes written to it. Beyond that, with
// onOver set, it calls onOver once and fails the write, which stops exec's
// copying; without onOver it drops the excess silently.
type capWriter struct {
	mu     sync.Mutex
	buf    []byte
	max    int
	over   bool
	onOver func()
}

func (w *capWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	room := w.max - len(w.buf)
	if !w.over && len(p) <= room {
		w.buf = append(w.buf, p...)
		return len(p), nil
	}
	if w.onOver == nil {
		w.buf = append(w.buf, p[:max(room, 0)]...)
		w.over = true
		return len(p), nil
	}
	if w.over {
		return 0, ErrOversizedOutput
	}
	w.buf = append(w.buf, p[:room]...)
	w.over = true
	w.onOver()
	return room, ErrOversizedOutput
}

// Bytes returns what was kept.
func (w *capWriter) Bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]byte(nil), w.buf...)
}

// Over reports whether more than max bytes were written.
func (w *capWriter) Over() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.over
}

func checkScript(script string) error {
	switch {
	case strings.TrimSpace(script) == "":
		return fmt.Errorf("%w: empty", ErrInvalidScript)
	case len(script) > maxScriptBytes:
		return fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidScript, len(script), maxScriptBytes)
	}
	return nil
}

func hashString(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// lastLine returns the last non-empty line of b (a traceback's error line).
func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return clip(lines[len(lines)-1])
}

// clip trims l to at most 300 bytes.
func clip(l string) string {
	l = strings.TrimSpace(l)
	if len(l) > 300 {
		l = l[:300]
	}
	return l
}
