package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"

	json "github.com/go-json-experiment/json/v1"
)

// nsSpec tells the namespaces helper what to build and run.
type nsSpec struct {
	TaskDir    string   `json:"task_dir"` // host path, mounted read-write at /task
	Binds      []string `json:"binds"`    // host dirs mounted read-only at the same path
	TmpfsBytes int64    `json:"tmpfs_bytes"`
	Limits     limits   `json:"limits"`
	Argv       []string `json:"argv"`
	// Prlimit, when set, is prlimit(1) under /usr: the limits are then set
	// by it, a single-threaded program, right before it execs the script.
	// The process limit set here, in this Go process, would also bound the
	// threads the Go runtime may still start before exec, which under
	// load aborts the runtime.
	Prlimit string `json:"prlimit,omitempty"`
}

// Linux constants missing from package syscall.
const (
	prSetNoNewPrivs  = 38
	oPath            = 0x200000
	rlimitNproc      = 6
	capV3            = 0x20080522
	secureBitsLocked = 1<<0 | 1<<1 | 1<<5 | 1<<6 | 1<<7 // NOROOT(+LOCKED), KEEP_CAPS_LOCKED, NO_CAP_AMBIENT_RAISE(+LOCKED)
	stNoSuid         = 0x2
	stNoDev          = 0x4
	stNoExec         = 0x8
	stNoAtime        = 0x400
	stNoDirAtime     = 0x800
	stRelAtime       = 0x1000
)

// nsInit runs in the helper process, PID 1 of fresh namespaces and uid 0 of a
// fresh user namespace (the unprivileged script uid on the host). It builds
// the root, drops every capability, loads the seccomp filter, applies the
// rlimits and execs the interpreter. It never returns on success.
func nsInit(raw string) error {
	runtime.LockOSThread() // capabilities and prctl state are per thread
	var sp nsSpec
	if err := json.Unmarshal([]byte(raw), &sp); err != nil || len(sp.Argv) == 0 {
		return fmt.Errorf("bad spec: %v", err)
	}
	if err := closeOnExecAll(); err != nil {
		return fmt.Errorf("close fds: %w", err)
	}
	if err := buildRoot(&sp); err != nil {
		return err
	}
	if err := dropPrivileges(); err != nil {
		return err
	}
	if err := loadSeccomp(); err != nil {
		return err
	}
	if sp.Prlimit != "" {
		// prlimit applies every limit, then execs the script.
		argv := sp.Limits.prlimitArgs(sp.Prlimit, sp.Argv)
		return syscall.Exec(argv[0], argv, os.Environ())
	}
	if err := applyLimits(sp.Limits); err != nil {
		return err
	}
	return syscall.Exec(sp.Argv[0], sp.Argv, os.Environ())
}

// mountOp is one entry of the new root: a symlink, a read-only directory, the
// read-write task dir or a device.
type mountOp struct {
	kind int
	src  string // the host path; the link target for opSymlink
	dest string
	fd   int // O_PATH descriptor of src, opened before /tmp is covered
}

const (
	opSymlink = iota
	opReadOnly
	opTask
	opDevice
)

// buildRoot assembles the new root on a tmpfs, pivots into it and makes it
// read-only: system dirs read-only, the task dir read-write at /task, a
// capped /tmp, a few devices and a /proc of the new PID namespace.
func buildRoot(sp *nsSpec) error {
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	ops, err := planRoot(sp)
	if err != nil {
		return err
	}
	// The new root covers /tmp, in this mount namespace only. Sources below
	// /tmp stay reachable through the descriptors opened by planRoot.
	root := "/tmp"
	if err := syscall.Mount("tmpfs", root, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=0755,size=1m"); err != nil {
		return fmt.Errorf("mount root tmpfs: %w", err)
	}
	for _, op := range ops {
		if err := op.apply(root); err != nil {
			return err
		}
	}
	if err := os.Mkdir(root+"/proc", 0o555); err != nil {
		return err
	}
	if err := syscall.Mount("proc", root+"/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount proc: %w", err)
	}
	if err := os.Mkdir(root+"/tmp", 0o1777); err != nil {
		return err
	}
	opts := "mode=1777,nr_inodes=4096,size=" + strconv.FormatInt(sp.TmpfsBytes, 10)
	if err := syscall.Mount("tmpfs", root+"/tmp", "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount tmp: %w", err)
	}
	// pivot_root(".", ".") stacks the old root on the new one; detaching it
	// leaves the new root alone. Nothing of the old root stays reachable.
	if err := syscall.Chdir(root); err != nil {
		return err
	}
	if err := syscall.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := syscall.Unmount(".", syscall.MNT_DETACH); err != nil {
		return fmt.Errorf("detach old root: %w", err)
	}
	if err := syscall.Mount("", "/", "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY|syscall.MS_NOSUID|syscall.MS_NODEV, ""); err != nil {
		return fmt.Errorf("remount root read-only: %w", err)
	}
	for _, op := range ops {
		if op.kind != opSymlink {
			syscall.Close(op.fd)
		}
	}
	// No further user namespaces below this one (what bwrap's
	// --disable-userns does): the limit is per user namespace and checked
	// at every level.
	if err := os.WriteFile("/proc/sys/user/max_user_namespaces", []byte("0\n"), 0); err != nil {
		return fmt.Errorf("disable nested user namespaces: %w", err)
	}
	return syscall.Chdir(sandboxTaskDir)
}

// planRoot lists the entries of the new root and opens their sources.
func planRoot(sp *nsSpec) ([]mountOp, error) {
	var ops []mountOp
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(d)
			if err != nil {
				return nil, err
			}
			ops = append(ops, mountOp{kind: opSymlink, src: target, dest: d})
		case fi.IsDir():
			ops = append(ops, mountOp{kind: opReadOnly, src: d, dest: d})
		}
	}
	for _, d := range sp.Binds {
		ops = append(ops, mountOp{kind: opReadOnly, src: d, dest: d})
	}
	ops = append(ops, mountOp{kind: opTask, src: sp.TaskDir, dest: sandboxTaskDir})
	for _, d := range devices {
		if _, err := os.Stat(d); err == nil {
			ops = append(ops, mountOp{kind: opDevice, src: d, dest: d})
		}
	}
	for i := range ops {
		if ops[i].kind == opSymlink {
			continue
		}
		flags := oPath | syscall.O_CLOEXEC | syscall.O_NOFOLLOW
		if ops[i].kind != opDevice {
			flags |= syscall.O_DIRECTORY
		}
		fd, err := syscall.Open(ops[i].src, flags, 0)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", ops[i].src, err)
		}
		ops[i].fd = fd
	}
	return ops, nil
}

// apply creates the entry below root.
func (op mountOp) apply(root string) error {
	dst := root + op.dest
	src := "/proc/self/fd/" + strconv.Itoa(op.fd)
	switch op.kind {
	case opSymlink:
		return os.Symlink(op.src, dst)
	case opReadOnly:
		return bindReadOnly(src, dst)
	case opTask:
		if err := os.Mkdir(dst, 0o755); err != nil {
			return err
		}
		if err := syscall.Mount(src, dst, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind task dir: %w", err)
		}
		flags := syscall.MS_BIND | syscall.MS_REMOUNT | syscall.MS_NOSUID | syscall.MS_NODEV | lockedFlags(dst)
		if err := syscall.Mount("", dst, "", flags, ""); err != nil {
			return fmt.Errorf("remount task dir: %w", err)
		}
	case opDevice:
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(dst, nil, 0o666); err != nil {
			return err
		}
		if err := syscall.Mount(src, dst, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s: %w", op.dest, err)
		}
	}
	return nil
}

// bindReadOnly bind-mounts src (not recursively) on dst, creating dst, and
// makes the mount read-only, nosuid and nodev.
func bindReadOnly(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	if err := syscall.Mount(src, dst, "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s: %w", dst, err)
	}
	flags := syscall.MS_BIND | syscall.MS_REMOUNT | syscall.MS_RDONLY | syscall.MS_NOSUID | syscall.MS_NODEV | lockedFlags(dst)
	if err := syscall.Mount("", dst, "", uintptr(flags), ""); err != nil {
		return fmt.Errorf("remount %s read-only: %w", dst, err)
	}
	return nil
}

// lockedFlags returns the flags of the mount at path that a user namespace
// may not clear on remount (noexec and the atime mode), so that they are kept.
func lockedFlags(path string) uintptr {
	var st syscall.Statfs_t
	if syscall.Statfs(path, &st) != nil {
		return 0
	}
	have := int64(st.Flags)
	var f uintptr
	for bit, ms := range map[int64]uintptr{
		stNoSuid: syscall.MS_NOSUID, stNoDev: syscall.MS_NODEV, stNoExec: syscall.MS_NOEXEC,
		stNoAtime: syscall.MS_NOATIME, stNoDirAtime: syscall.MS_NODIRATIME, stRelAtime: syscall.MS_RELATIME,
	} {
		if have&bit != 0 {
			f |= ms
		}
	}
	return f
}

// closeOnExecAll marks every descriptor above stderr close-on-exec, so no
// descriptor of a host directory survives into the script.
func closeOnExecAll() error {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
	return nil
}

// dropPrivileges leaves the script no capability, now or after exec: root
// gets no implicit capabilities (securebits), the bounding set is emptied,
// the current sets are cleared and no_new_privs is set.
func dropPrivileges() error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_SECUREBITS, secureBitsLocked, 0); e != 0 {
		return fmt.Errorf("securebits: %w", e)
	}
	for c := 0; c < 64; c++ {
		if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_CAPBSET_DROP, uintptr(c), 0); e == syscall.EINVAL {
			break
		} else if e != 0 {
			return fmt.Errorf("drop capability %d: %w", c, e)
		}
	}
	hdr := struct {
		version uint32
		pid     int32
	}{version: capV3}
	var data [2]struct{ effective, permitted, inheritable uint32 }
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("capset: %w", e)
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0); e != 0 {
		return fmt.Errorf("no_new_privs: %w", e)
	}
	return nil
}

// applyLimits sets the script's rlimits; they survive exec.
func applyLimits(l limits) error {
	for _, r := range []struct {
		res int
		val int64
	}{
		{syscall.RLIMIT_AS, l.AS}, {syscall.RLIMIT_CPU, l.CPU}, {syscall.RLIMIT_FSIZE, l.FSize},
		{syscall.RLIMIT_NOFILE, l.NoFile}, {syscall.RLIMIT_CORE, 0}, {rlimitNproc, l.NProc},
	} {
		v := uint64(r.val)
		if err := syscall.Setrlimit(r.res, &syscall.Rlimit{Cur: v, Max: v}); err != nil {
			return fmt.Errorf("rlimit %d: %w", r.res, err)
		}
	}
	return nil
}
