package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestEscape runs deliberate escape attempts under every isolation mode.
// Each case asserts a specific outcome (denied, killed or truncated) and that
// the host is unchanged.
func TestEscape(t *testing.T) {
	for _, mode := range isolatedModes {
		t.Run(mode, func(t *testing.T) {
			s := newSandbox(t, mode, nil)
			// Sequential first: it compares the host's process count.
			t.Run("fork_bomb", func(t *testing.T) { escapeForkBomb(t, s) })
			for name, fn := range map[string]func(*testing.T, *Sandbox){
				"tcp_connect":          escapeTCPConnect,
				"dns_lookup":           escapeDNS,
				"read_host_files":      escapeReadHostFiles,
				"write_outside":        escapeWriteOutside,
				"allocate_4gb":         escapeAllocate,
				"infinite_loop":        escapeInfiniteLoop,
				"print_10mb":           escapePrint10MB,
				"background_process":   escapeBackgroundProcess,
				"environment_secrets":  escapeEnvironment,
				"inherited_fd":         escapeInheritedFD,
				"privileges":           escapePrivileges,
				"host_processes":       escapeHostProcesses,
				"input_swapped_out":    escapeInputSwapped,
				"nested_user_ns_mount": escapeNestedNamespaces,
			} {
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					fn(t, s)
				})
			}
		})
	}
}

func escapeTCPConnect(t *testing.T, s *Sandbox) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan string, 16) // the peers' addresses
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c.RemoteAddr().String()
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	targets := []string{fmt.Sprintf("('127.0.0.1', %d)", port)}
	// The host's own non-loopback addresses, which a shared network
	// namespace would reach.
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ip, ok := a.(*net.IPNet); ok && !ip.IP.IsLoopback() && ip.IP.To4() != nil {
				targets = append(targets, fmt.Sprintf("('%s', %d)", ip.IP, port))
			}
		}
	}
	script := fmt.Sprintf(`import socket
for addr in [%s]:
    try:
        socket.create_connection(addr, timeout=2).close()
        print("%%s: connected" %% (addr,))
    except OSError as e:
        print("%%s: denied %%s" %% (addr, e))
`, strings.Join(targets, ", "))
	_, _, res, err := run(t, s, 10*time.Second, script)
	mustSucceed(t, res, err)
	got := outputLines(res.Output)
	if len(got) != len(targets) {
		t.Fatalf("output %q", res.Output)
	}
	for addr, outcome := range got {
		if !strings.HasPrefix(outcome, "denied") {
			t.Errorf("%s: %s", addr, outcome)
		}
	}
	// The listener accepts in order: once a connection made now is
	// accepted, any the script made was accepted before it.
	mark, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer mark.Close()
	others := 0
	for peer := ""; peer != mark.LocalAddr().String(); {
		select {
		case peer = <-accepted:
			if peer != mark.LocalAddr().String() {
				others++
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the listener never accepted the test's own connection")
		}
	}
	if others != 0 {
		t.Fatalf("listener saw %d connections", others)
	}
	t.Logf("outcome: %s", bytes.TrimSpace(res.Output))
}

func escapeDNS(t *testing.T, s *Sandbox) {
	_, _, res, err := run(t, s, 10*time.Second, `import socket, os
for name in ["example.com", "localhost"]:
    try:
        print("%s: resolved %s" % (name, socket.getaddrinfo(name, 80)[0][4]))
    except OSError as e:
        print("%s: denied %s" % (name, e))
print("resolv.conf: %s" % ("present" if os.path.exists("/etc/resolv.conf") else "denied absent"))
`)
	mustSucceed(t, res, err)
	got := outputLines(res.Output)
	if !strings.HasPrefix(got["example.com"], "denied") || !strings.HasPrefix(got["resolv.conf"], "denied") {
		t.Fatalf("output %q", res.Output)
	}
	t.Logf("outcome: %s", bytes.TrimSpace(res.Output))
}

func escapeReadHostFiles(t *testing.T, s *Sandbox) {
	task, _ := newTask(t, s, menu)
	secret := "parent-secret-" + randomHex(8)
	planted := filepath.Join(filepath.Dir(task.Dir), "planted-"+randomHex(4))
	if err := os.WriteFile(planted, []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(planted)
	// A symlink inside the task dir that points at the planted file.
	if err := os.Symlink(planted, filepath.Join(task.Dir, "link")); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`import os
for p in ["/etc/passwd", "/etc/shadow", %q, "../%s", "link", "/proc/1/root/etc/passwd", "/root", "/home"]:
    try:
        with open(p) as f:
            print("%%s: read %%s" %% (p, f.read(200).replace("\n", " ")))
    except OSError as e:
        print("%%s: denied %%s" %% (p, type(e).__name__))
print("listing of ..: %%s" %% sorted(os.listdir("..")))
`, planted, filepath.Base(planted))
	task.Timeout = 10 * time.Second
	res, err := s.ExecPython(context.Background(), task, script, mustWrite(t, task))
	mustSucceed(t, res, err)
	if bytes.Contains(res.Output, []byte(secret)) || bytes.Contains(res.Output, []byte("root:x:0")) ||
		strings.Contains(firstLine(res.Output, "listing of .."), filepath.Base(planted)) {
		t.Fatalf("host file readable:\n%s", res.Output)
	}
	for k, v := range outputLines(res.Output) {
		if !strings.HasPrefix(k, "listing") && !strings.HasPrefix(v, "denied") {
			t.Errorf("%s: %s", k, v)
		}
	}
	t.Logf("outcome: %s", bytes.TrimSpace(res.Output))
}

func escapeWriteOutside(t *testing.T, s *Sandbox) {
	task, _ := newTask(t, s, menu)
	outside := filepath.Dir(task.Dir)
	target := filepath.Join(outside, "created-"+randomHex(4))    // must not appear
	existing := filepath.Join(outside, "existing-"+randomHex(4)) // must stay unchanged
	tmpTarget := filepath.Join(os.TempDir(), "agentbus-escape-"+randomHex(4))
	if err := os.WriteFile(existing, []byte("original"), 0o666); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(existing)
	for link, to := range map[string]string{"link-new": target, "link-existing": existing, "link-tmp": tmpTarget, "link-dir": outside} {
		if err := os.Symlink(to, filepath.Join(task.Dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	script := fmt.Sprintf(`import os
def attempt(name, fn):
    try:
        fn()
        print("%%s: wrote" %% name)
    except OSError as e:
        print("%%s: denied %%s" %% (name, type(e).__name__))
def write(p):
    return lambda: open(p, "w").write("pwned")
def force(p):  # recreate the host path inside the sandbox, then write
    def f():
        os.makedirs(os.path.dirname(p), exist_ok=True)
        open(p, "w").write("pwned")
    return f
attempt("usr", write("/usr/pwned"))
attempt("etc", write("/etc/pwned"))
attempt("root", write("/pwned"))
attempt("parent", write("../pwned"))
attempt("abs-target", write(%[1]q))
attempt("abs-existing", write(%[2]q))
attempt("link-new", write("link-new"))
attempt("link-existing", write("link-existing"))
attempt("link-tmp", write("link-tmp"))
attempt("link-dir", write("link-dir/pwned"))
attempt("force-target", force(%[1]q))
attempt("force-existing", force(%[2]q))
attempt("force-tmp", force(%[3]q))
attempt("rename-task", lambda: os.rename("/task", "/task2"))
`, target, existing, tmpTarget)
	task.Timeout = 10 * time.Second
	res, err := s.ExecPython(context.Background(), task, script, mustWrite(t, task))
	mustSucceed(t, res, err)
	for _, p := range []string{target, tmpTarget, filepath.Join(outside, "pwned"), "/usr/pwned", "/etc/pwned", "/pwned"} {
		if _, err := os.Lstat(p); err == nil {
			os.Remove(p)
			t.Errorf("host file %s was created", p)
		}
	}
	if b, err := os.ReadFile(existing); err != nil || string(b) != "original" {
		t.Errorf("host file changed: %q, %v", b, err)
	}
	got := outputLines(res.Output)
	for _, k := range []string{"usr", "etc", "root", "parent", "link-new", "link-existing", "link-dir", "rename-task"} {
		if !strings.HasPrefix(got[k], "denied") {
			t.Errorf("%s: %q", k, got[k])
		}
	}
	t.Logf("outcome (writes that succeeded went to the sandbox's own /tmp): %s", bytes.TrimSpace(res.Output))
}

func escapeForkBomb(t *testing.T, s *Sandbox) {
	before := hostProcessCount(t)
	_, id, res, err := run(t, s, 3*time.Second, `import os, sys
print("started", flush=True)
reported = False
while True:
    try:
        os.fork()
    except OSError as e:
        if not reported:
            print("fork: denied", e, flush=True)
            reported = True
`)
	if !errors.Is(err, ErrTimeout) || !res.Killed || res.Reason != ReasonTimeout {
		t.Fatalf("err = %v, result %+v", err, res)
	}
	if !bytes.Contains(res.Output, []byte("fork: denied")) {
		t.Errorf("process limit never hit: %q", res.Output)
	}
	waitNoProcess(t, id)
	deadline := time.Now().Add(5 * time.Second)
	for {
		after := hostProcessCount(t)
		if after <= before+2 {
			t.Logf("outcome: %v; limited (%q); host processes before %d, after %d", err, firstLine(res.Output, "fork"), before, after)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("host processes before %d, after %d", before, after)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func escapeAllocate(t *testing.T, s *Sandbox) {
	_, _, res, err := run(t, s, 10*time.Second, `b = bytearray(4 * 1024 ** 3)
print("allocated", len(b))
`)
	if !errors.Is(err, ErrScriptFailed) || !bytes.Contains(res.Stderr, []byte("MemoryError")) {
		t.Fatalf("err = %v, stdout %q, stderr %q", err, res.Output, res.Stderr)
	}
	t.Logf("outcome: %v", err)
}

func escapeInfiniteLoop(t *testing.T, s *Sandbox) {
	_, _, res, err := run(t, s, 2*time.Second, "while True:\n    pass\n")
	if !errors.Is(err, ErrTimeout) || !res.Killed || res.Reason != ReasonTimeout {
		t.Fatalf("err = %v, result %+v", err, res)
	}
	// The deadline is set before the process starts and the duration
	// measured from its start, so it may read a few ms under 2 s.
	if res.Duration < 1900*time.Millisecond || res.Duration > 4*time.Second {
		t.Fatalf("killed after %s, want about 2s", res.Duration)
	}
	t.Logf("outcome: %v, killed after %s", err, res.Duration.Round(time.Millisecond))
}

func escapePrint10MB(t *testing.T, s *Sandbox) {
	_, _, res, err := run(t, s, 10*time.Second, "import sys\nsys.stdout.write('x' * 10_000_000)\n")
	if !errors.Is(err, ErrOversizedOutput) || res.Reason != ReasonOversizedOutput || !res.Killed {
		t.Fatalf("err = %v, result reason %q", err, res.Reason)
	}
	if len(res.Output) != s.Config().OutputCap {
		t.Fatalf("kept %d bytes, want %d", len(res.Output), s.Config().OutputCap)
	}
	t.Logf("outcome: %v, %d bytes kept", err, len(res.Output))
}

func escapeBackgroundProcess(t *testing.T, s *Sandbox) {
	token := "bgtoken" + randomHex(6)
	marker := "marker-" + token
	daemon := fmt.Sprintf("import time; time.sleep(1.5); open('/task/%s', 'w').write('x')  # %s", marker, token)
	task, _, res, err := run(t, s, 10*time.Second, fmt.Sprintf(`import os, subprocess, sys
daemon = %q
subprocess.Popen([sys.executable, "-c", daemon], start_new_session=True,
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
if os.fork() == 0:  # double fork + setsid, the classic daemon
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", daemon])
    os._exit(0)
subprocess.Popen(["sleep", "30"], start_new_session=True)
print("spawned")
`, daemon))
	mustSucceed(t, res, err)
	waitNoProcess(t, token)
	time.Sleep(2500 * time.Millisecond)
	waitNoProcess(t, token)
	if _, err := os.Lstat(filepath.Join(task.Dir, marker)); err == nil {
		t.Fatal("a background process outlived the call and wrote its marker")
	}
	t.Logf("outcome: no process with the token after the call, no marker after 2.5s")
}

func escapeEnvironment(t *testing.T, s *Sandbox) {
	if os.Getenv(secretEnv) != secretValue {
		t.Fatal("test secret not set in the parent environment")
	}
	_, _, res, err := run(t, s, 10*time.Second, `import os
print("environ:", sorted(os.environ))
for p in ["/proc/self/environ", "/proc/1/environ"]:
    try:
        print(p + ":", open(p, "rb").read().replace(b"\0", b" ").decode())
    except OSError as e:
        print(p + ": denied", type(e).__name__)
`)
	mustSucceed(t, res, err)
	if bytes.Contains(res.Output, []byte(secretEnv)) || bytes.Contains(res.Output, []byte(secretValue)) {
		t.Fatalf("secret visible:\n%s", res.Output)
	}
	t.Logf("outcome: %s", firstLine(res.Output, "environ:"))
}

func escapeInheritedFD(t *testing.T, s *Sandbox) {
	secret := "fd-secret-" + randomHex(8)
	path := filepath.Join(filepath.Dir(s.Config().Root), "fd-"+randomHex(4))
	if err := os.WriteFile(path, []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(path)
	// Opened without O_CLOEXEC, like a descriptor inherited from a parent.
	fd, err := syscall.Open(path, syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	dirfd, err := syscall.Open(filepath.Dir(path), syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(dirfd)
	syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_SETFD, 0)
	syscall.Syscall(syscall.SYS_FCNTL, uintptr(dirfd), syscall.F_SETFD, 0)
	_, _, res, err := run(t, s, 10*time.Second, fmt.Sprintf(`import os
fds = sorted(int(f) for f in os.listdir("/proc/self/fd"))
print("fds:", fds)
for fd in [%d, %d]:
    try:
        print("fd %%d: read" %% fd, os.read(fd, 100))
    except OSError as e:
        print("fd %%d: denied" %% fd, type(e).__name__)
    try:
        print("fd %%d dir: listed" %% fd, os.listdir(fd))
    except (OSError, TypeError) as e:
        print("fd %%d dir: denied" %% fd, type(e).__name__)
`, fd, dirfd))
	mustSucceed(t, res, err)
	if bytes.Contains(res.Output, []byte(secret)) || bytes.Contains(res.Output, []byte(filepath.Base(path))) ||
		bytes.Contains(res.Output, []byte(": read")) || bytes.Contains(res.Output, []byte(": listed")) {
		t.Fatalf("inherited descriptor usable:\n%s", res.Output)
	}
	t.Logf("outcome: %s", firstLine(res.Output, "fds:"))
}

func escapePrivileges(t *testing.T, s *Sandbox) {
	task, id := newTask(t, s, menu)
	task.Timeout = 10 * time.Second
	// Watch the script's processes from the host while it runs: the file id
	// is on python's command line.
	hostUIDs := make(chan map[string]bool)
	go func() {
		uids := map[string]bool{}
		for deadline := time.Now().Add(5 * time.Second); len(uids) == 0 && time.Now().Before(deadline); {
			for _, pid := range processesWith(id) {
				if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
					if l := firstLine(b, "Uid:"); l != "" {
						for _, f := range strings.Fields(l)[1:] {
							uids[f] = true
						}
					}
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		hostUIDs <- uids
	}()
	res, err := s.ExecPython(context.Background(), task, `import os, resource, time
status = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
for k in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs"]:
    print("%s: %s" % (k, status[k].strip()))
for k in ["RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NPROC", "RLIMIT_NOFILE", "RLIMIT_CORE"]:
    print("%s: %d %d" % ((k,) + resource.getrlimit(getattr(resource, k))))
print("uid: %d" % os.getuid())
time.sleep(1)
`, id)
	mustSucceed(t, res, err)
	got := outputLines(res.Output)
	for _, k := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
		if strings.Trim(got[k], "0") != "" {
			t.Errorf("%s = %s", k, got[k])
		}
	}
	if got["NoNewPrivs"] != "1" {
		t.Errorf("NoNewPrivs = %q", got["NoNewPrivs"])
	}
	cfg := s.Config()
	for k, v := range map[string]int64{
		"RLIMIT_AS": cfg.MemoryBytes, "RLIMIT_CPU": int64(cfg.CPUSeconds), "RLIMIT_FSIZE": cfg.FileSizeBytes,
		"RLIMIT_NPROC": int64(cfg.MaxProcs), "RLIMIT_NOFILE": maxOpenFiles, "RLIMIT_CORE": 0,
	} {
		if want := fmt.Sprintf("%d %d", v, v); got[k] != want {
			t.Errorf("%s = %q, want %q", k, got[k], want)
		}
	}
	// On the host the script is the unprivileged script uid, never root.
	uids := <-hostUIDs
	want := strconv.Itoa(s.runUID)
	if len(uids) != 1 || !uids[want] || uids["0"] {
		t.Errorf("script processes ran as host uids %v, want only %s", uids, want)
	}
	t.Logf("outcome: no capabilities, no_new_privs, limits as configured, uid %s inside, host uids %v", got["uid"], uids)
}

func escapeHostProcesses(t *testing.T, s *Sandbox) {
	_, _, res, err := run(t, s, 10*time.Second, fmt.Sprintf(`import os, signal
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
print("visible pids: %%s" %% pids)
try:
    os.kill(%d, signal.SIGKILL)
    print("kill host: sent")
except OSError as e:
    print("kill host: denied", type(e).__name__)
`, os.Getpid()))
	mustSucceed(t, res, err)
	got := outputLines(res.Output)
	if !strings.HasPrefix(got["kill host"], "denied") {
		t.Errorf("kill host: %s", got["kill host"])
	}
	if n := len(strings.Split(got["visible pids"], ",")); n > 3 {
		t.Errorf("sees %d processes: %s", n, got["visible pids"])
	}
	t.Logf("outcome: %s", bytes.TrimSpace(res.Output))
}

// escapeInputSwapped: a script replaces its input with a symlink to a host
// file, then with a FIFO; host-side reads must refuse both, without hanging.
func escapeInputSwapped(t *testing.T, s *Sandbox) {
	task, id, res, err := run(t, s, 10*time.Second, `import os, sys
os.remove(sys.argv[1])
os.symlink("/etc/shadow", sys.argv[1])
print("swapped")
`)
	mustSucceed(t, res, err)
	if _, err := task.ReadLines(id, 0, 5); !errors.Is(err, ErrInvalidFileID) {
		t.Fatalf("ReadLines through a planted symlink: %v", err)
	}
	if _, err := s.ExecJQ(context.Background(), task, ".", id); !errors.Is(err, ErrInvalidFileID) {
		t.Fatalf("ExecJQ through a planted symlink: %v", err)
	}
	id2 := mustWrite(t, task)
	if res, err := s.ExecPython(context.Background(), task, "import os, sys\nos.remove(sys.argv[1])\nos.mkfifo(sys.argv[1])\n", id2); err != nil {
		t.Fatalf("fifo script: %v %s", err, res.Stderr)
	}
	if _, err := task.ReadLines(id2, 0, 5); !errors.Is(err, ErrInvalidFileID) {
		t.Fatalf("ReadLines of a planted FIFO: %v", err)
	}
	t.Log("outcome: host-side reads refuse the planted symlink and FIFO (ErrInvalidFileID)")
}

// escapeNestedNamespaces: new user namespaces (and with them the capabilities
// to mount over the read-only root) are refused.
func escapeNestedNamespaces(t *testing.T, s *Sandbox) {
	_, _, res, err := run(t, s, 10*time.Second, `import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
for name, flags in [("userns", 0x10000000), ("mountns", 0x00020000), ("netns", 0x40000000)]:
    if libc.unshare(flags) == 0:
        print("%s: created" % name)
    else:
        print("%s: denied %s" % (name, os.strerror(ctypes.get_errno())))
try:
    open("/proc/sys/user/max_user_namespaces", "w").write("100")
    print("raise userns limit: written")
except OSError as e:
    print("raise userns limit: denied", type(e).__name__)
r = libc.mount(b"none", b"/usr", b"tmpfs", 0, None)
print("mount: %s" % ("mounted" if r == 0 else "denied " + os.strerror(ctypes.get_errno())))
`)
	mustSucceed(t, res, err)
	for k, v := range outputLines(res.Output) {
		if !strings.HasPrefix(v, "denied") {
			t.Errorf("%s: %s", k, v)
		}
	}
	t.Logf("outcome: %s", bytes.TrimSpace(res.Output))
}
