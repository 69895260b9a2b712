package sandbox

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"time"
)

// maxLineBytes bounds one line returned by ReadLines; longer lines are cut
// and end with a "… [+N bytes]" marker so a minified JSON sample cannot flood
// a model's context.
const maxLineBytes = 4096

// maxReadLines bounds n in ReadLines.
const maxReadLines = 1000

// sandboxTaskDir is where the task dir appears inside the sandbox.
const sandboxTaskDir = "/task"

var (
	fileIDPattern  = regexp.MustCompile(`^f_[0-9a-f]{16}$`)
	taskDirPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}-[0-9a-f]{16}$`)
	unsafeIDChars  = regexp.MustCompile(`[^A-Za-z0-9_-]+`)
)

// Task is the temp dir of one task: the files written with WriteTemp and the
// working directory of its scripts. Call Close when the task finishes.
type Task struct {
	// ID is the task id given to NewTask.
	ID string
	// Dir is the host path of the task dir, Root/<safe id>-<random>, mode 0700.
	Dir string
	// Timeout, when positive, replaces Config.Timeout for this task's calls.
	// Set it before the first call.
	Timeout time.Duration

	s      *Sandbox
	mu     sync.Mutex
	closed bool
}

// NewTask creates the temp dir of taskID. The id is sanitised for the dir
// name; a random suffix keeps dirs of equal ids apart.
func (s *Sandbox) NewTask(taskID string) (*Task, error) {
	return s.newTask(taskID)
}

func (s *Sandbox) newTask(taskID string) (*Task, error) {
	safe := unsafeIDChars.ReplaceAllString(taskID, "_")
	if len(safe) > 48 {
		safe = safe[:48]
	}
	if safe == "" {
		safe = "task"
	}
	dir := filepath.Join(s.cfg.Root, safe+"-"+randomHex(8))
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: task dir: %w", ErrSetup, err)
	}
	if s.asRoot {
		if err := os.Lchown(dir, s.runUID, s.runGID); err != nil {
			_ = os.Remove(dir)
			return nil, fmt.Errorf("%w: task dir: %w", ErrSetup, err)
		}
	}
	return &Task{ID: taskID, Dir: dir, s: s}, nil
}

// WriteTemp writes data to a new file in the task dir and returns its id, an
// opaque name that ReadLines, ExecPython and ExecJQ accept. The file is
// readable by the task's scripts.
func (t *Task) WriteTemp(data []byte) (string, error) {
	if err := t.check(); err != nil {
		return "", err
	}
	id := "f_" + randomHex(8)
	f, err := os.OpenFile(filepath.Join(t.Dir, id), os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o400)
	if err != nil {
		return "", fmt.Errorf("%w: write temp: %w", ErrSetup, err)
	}
	if t.s.asRoot {
		err = f.Chown(t.s.runUID, t.s.runGID)
	}
	if err == nil {
		_, err = f.Write(data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(filepath.Join(t.Dir, id))
		return "", fmt.Errorf("%w: write temp: %w", ErrSetup, err)
	}
	return id, nil
}

// ReadLines returns up to n lines of the file starting at line start (0-based),
// without their line ends. Lines longer than 4 KiB are cut with a marker.
func (t *Task) ReadLines(fileID string, start, n int) ([]string, error) {
	if start < 0 || n < 0 || n > maxReadLines {
		return nil, fmt.Errorf("%w: start %d, n %d (at most %d lines)", ErrInvalidArgument, start, n, maxReadLines)
	}
	f, err := t.openFile(fileID)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	var lines []string
	for i := 0; len(lines) < n; i++ {
		line, more, err := readLine(r, i >= start)
		if err != nil {
			return nil, fmt.Errorf("%w: read lines: %w", ErrSetup, err)
		}
		if i >= start && (more || line != "") {
			lines = append(lines, line)
		}
		if !more {
			break
		}
	}
	return lines, nil
}

// readLine reads one line, keeping at most maxLineBytes of it when keep is
// set. more is false at the end of the file.
func readLine(r *bufio.Reader, keep bool) (line string, more bool, err error) {
	var buf []byte
	dropped := 0
	for {
		chunk, err := r.ReadSlice('\n')
		if len(chunk) > 0 && chunk[len(chunk)-1] == '\n' {
			chunk = chunk[:len(chunk)-1]
			more = true
		}
		if keep {
			room := maxLineBytes - len(buf)
			if room > len(chunk) {
				room = len(chunk)
			}
			buf = append(buf, chunk[:room]...)
			dropped += len(chunk) - room
		}
		switch {
		case err == nil || more:
			return finishLine(buf, dropped), true, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return finishLine(buf, dropped), false, nil
		default:
			return "", false, err
		}
	}
}

func finishLine(buf []byte, dropped int) string {
	if dropped > 0 {
		return fmt.Sprintf("%s… [+%d bytes]", buf, dropped)
	}
	return string(buf)
}

// Close wipes the task dir. It is idempotent.
func (t *Task) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	if err := removeTree(t.Dir); err != nil {
		return fmt.Errorf("%w: wipe task dir: %w", ErrSetup, err)
	}
	return nil
}

func (t *Task) check() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrTaskClosed
	}
	return nil
}

// openFile opens a temp file of the task for reading. Scripts control the
// task dir, so the id must be one WriteTemp could have made and the file must
// be a regular file reached without following a symlink (a script may have
// replaced it with a link to a host file, or with a FIFO).
func (t *Task) openFile(fileID string) (*os.File, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	if !fileIDPattern.MatchString(fileID) {
		return nil, fmt.Errorf("%w: %q", ErrInvalidFileID, fileID)
	}
	f, err := os.OpenFile(filepath.Join(t.Dir, fileID), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %w", ErrInvalidFileID, fileID, err)
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%w: %q is not a regular file", ErrInvalidFileID, fileID)
	}
	return f, nil
}

// readFile reads a temp file of the task (see openFile).
func (t *Task) readFile(fileID string) ([]byte, error) {
	f, err := t.openFile(fileID)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// timeout is the time limit of one call of this task.
func (t *Task) timeout() time.Duration {
	if t.Timeout > 0 {
		return t.Timeout
	}
	return t.s.cfg.Timeout
}

// removeTree removes dir and everything below it without following symlinks.
// If a script left directories without write permission (possible when
// scripts run as this process's own uid), it restores them and retries.
func removeTree(dir string) error {
	err := os.RemoveAll(dir)
	if err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Type()&fs.ModeSymlink == 0 {
			_ = os.Chmod(path, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// fileOwner returns the owner uid of fi, if the platform reports one.
func fileOwner(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
