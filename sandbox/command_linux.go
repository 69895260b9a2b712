package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	json "github.com/go-json-experiment/json/v1"
)

// limits are the rlimits applied to every script process.
type limits struct {
	AS, CPU, FSize, NProc, NoFile int64
}

// prlimitArgs is the prlimit(1) invocation that applies l and runs argv.
func (l limits) prlimitArgs(prlimit string, argv []string) []string {
	args := []string{prlimit,
		"--as=" + strconv.FormatInt(l.AS, 10),
		"--cpu=" + strconv.FormatInt(l.CPU, 10),
		"--fsize=" + strconv.FormatInt(l.FSize, 10),
		"--nproc=" + strconv.FormatInt(l.NProc, 10),
		"--nofile=" + strconv.FormatInt(l.NoFile, 10),
		"--core=0",
		"--"}
	return append(args, argv...)
}

// pythonCommand builds the command running argv (the interpreter and its
// arguments, with sandbox paths) under the sandbox's isolation mode.
func (s *Sandbox) pythonCommand(t *Task, dir string, argv []string) (*exec.Cmd, error) {
	switch s.mode {
	case IsolationBwrap:
		return s.bwrapCommand(t, argv)
	case IsolationNamespaces:
		return s.nsCommand(t, argv)
	case IsolationNone:
		if s.prlimit == "" {
			return nil, fmt.Errorf("%w: prlimit (util-linux) not found", ErrSetup)
		}
		args := s.limits.prlimitArgs(s.prlimit, argv)
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir, cmd.Env = dir, sandboxEnv(dir)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.credential()}
		return cmd, nil
	}
	return nil, fmt.Errorf("%w: isolation %q", ErrNoIsolation, s.mode)
}

// setProcAttrs puts cmd in a session and process group of its own (killed
// as a whole, and without a controlling terminal) and has the kernel kill it
// if this process dies.
func setProcAttrs(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

// closeInheritedFiles marks every descriptor of this process above stderr
// close-on-exec. Go opens everything close-on-exec, but descriptors inherited
// from this process's own parent are not, and exec would pass them on into
// the sandbox (bwrap does not close them). Marking an unrelated descriptor
// that a concurrent goroutine just opened is harmless: Go wants it that way.
func closeInheritedFiles() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}

// credential drops a root process to the script uid; nil otherwise.
func (s *Sandbox) credential() *syscall.Credential {
	if !s.asRoot {
		return nil
	}
	return &syscall.Credential{Uid: uint32(s.runUID), Gid: uint32(s.runGID), Groups: []uint32{}}
}

// bwrapCommand runs argv under bubblewrap: fresh user (nested, with further
// user namespaces disabled), mount, PID, network, IPC, UTS and cgroup
// namespaces; no capabilities; only the system dirs read-only, the task dir
// read-write at /task, a size-capped /tmp, a few devices and a fresh /proc;
// rlimits applied by prlimit(1) inside; the seccomp filter loaded by bwrap
// right before it execs; killed with its parent.
func (s *Sandbox) bwrapCommand(t *Task, argv []string) (*exec.Cmd, error) {
	if s.bwrap == "" || s.prlimit == "" {
		return nil, fmt.Errorf("%w: bwrap or prlimit (util-linux) not found; run deploy/sandbox/setup.sh", ErrNoIsolation)
	}
	args := []string{
		"--unshare-all", "--unshare-user", "--disable-userns",
		"--die-with-parent", "--new-session", "--cap-drop", "ALL",
		"--hostname", "sandbox",
	}
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(d)
			if err == nil {
				args = append(args, "--symlink", target, d)
			}
		case fi.IsDir():
			args = append(args, "--ro-bind", d, d)
		}
	}
	for _, d := range s.py.extra {
		args = append(args, "--ro-bind", d, d)
	}
	for _, d := range devices {
		if _, err := os.Stat(d); err == nil {
			args = append(args, "--dev-bind", d, d)
		}
	}
	args = append(args,
		"--proc", "/proc",
		"--size", strconv.FormatInt(s.cfg.FileSizeBytes, 10), "--tmpfs", "/tmp",
		"--bind", t.Dir, sandboxTaskDir,
		"--remount-ro", "/",
		"--chdir", sandboxTaskDir,
		"--seccomp", "3", // the filter (seccomp_linux.go), ExtraFiles[0]
		"--")
	args = append(args, s.limits.prlimitArgs(s.prlimit, argv)...)
	filter, err := seccompFile()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(s.bwrap, args...)
	cmd.Env = sandboxEnv(sandboxTaskDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.credential()}
	cmd.ExtraFiles = []*os.File{filter} // closed by run once bwrap has started
	return cmd, nil
}

// nsCommand re-executes this binary as the namespaces helper (nsinit.go) in
// fresh user, mount, PID, network, IPC, UTS and cgroup namespaces. The helper
// builds the same filesystem view as bwrap, drops every capability, applies
// the rlimits and execs argv.
//
// The helper is uid 0 of its user namespace, which is the unprivileged script
// uid on the host: it has capabilities only over its own namespaces, and the
// host's file permissions apply to it as to the script. Like bwrap, it reaches
// the task dir and python by path, so they must be searchable by that uid
// (Root is 0711 when running as root). Directory descriptors passed from here
// would not do: the kernel refuses bind sources from another mount namespace.
func (s *Sandbox) nsCommand(t *Task, argv []string) (*exec.Cmd, error) {
	spec := nsSpec{Argv: argv, Limits: s.limits, TmpfsBytes: s.cfg.FileSizeBytes, TaskDir: t.Dir, Binds: s.py.extra}
	if real, err := filepath.EvalSymlinks(s.prlimit); err == nil && strings.HasPrefix(real, "/usr/") {
		spec.Prlimit = real // /usr is mounted in the new root
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSetup, err)
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{nsInitArg0, string(raw)}
	cmd.Env = sandboxEnv(sandboxTaskDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID |
			syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWCGROUP,
		// uid/gid 0 inside is s.runUID/s.runGID on the host.
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: s.runUID, Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: s.runGID, Size: 1}},
		GidMappingsEnableSetgroups: s.asRoot,
		// Switch to the mapped ids before exec: without this the child would
		// keep this process's host uid.
		Credential: &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}, NoSetGroups: !s.asRoot},
	}
	return cmd, nil
}

// jqCommand re-executes this binary as the jq helper (jq.go), as the script
// uid, with an empty environment.
func (s *Sandbox) jqCommand(spec string) *exec.Cmd {
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{jqArg0, spec}
	// A crash reports one line, no stacks. GORACE only matters in race
	// builds (tests), where the runtime would otherwise sleep 1 s at exit.
	cmd.Env = []string{"GOTRACEBACK=none", "GORACE=atexit_sleep_ms=0"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.credential()}
	return cmd
}

// jqLimits applies the memory, CPU and descriptor limits to the jq helper
// itself, before it reads the expression. The Go runtime reserves address
// space up front (far more under the race detector), so RLIMIT_AS is the
// current size plus l.AS. No process limit: the Go runtime needs its
// threads, and gojq cannot fork.
func jqLimits(l limits) error {
	as := l.AS + vmSize()
	for _, r := range []struct {
		res int
		val int64
	}{
		{syscall.RLIMIT_AS, as}, {syscall.RLIMIT_CPU, l.CPU}, {syscall.RLIMIT_FSIZE, 0},
		{syscall.RLIMIT_NOFILE, 32}, {syscall.RLIMIT_CORE, 0},
	} {
		v := uint64(r.val)
		if err := syscall.Setrlimit(r.res, &syscall.Rlimit{Cur: v, Max: v}); err != nil {
			return fmt.Errorf("rlimit %d: %w", r.res, err)
		}
	}
	return nil
}

// vmSize returns this process's virtual memory size in bytes (0 if unknown).
func vmSize() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmSize:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
