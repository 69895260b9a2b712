package sandbox

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The seccomp filter every sandboxed process runs under (scripts under both
// isolation modes, and the jq helper). It is a deny list: the classes of
// system call that extraction never needs and that widen the kernel's attack
// surface. The namespaces, capabilities and mounts already keep a script from
// reaching the host; the filter keeps it from reaching the kernel code behind
// these calls at all. A denied call fails with EPERM (clone3 with ENOSYS, so
// that the C library falls back to clone, whose flags the filter can read).

// deniedSyscalls lists the denied calls by class. The class names are what
// the tests and docs/ARCHITECTURE.md use.
var deniedSyscalls = []struct {
	class string
	names []string
}{
	{"ptrace", []string{"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp"}},
	{"mount", []string{"mount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount", "fspick",
		"move_mount", "open_tree", "mount_setattr"}},
	{"namespaces", []string{"unshare", "setns"}}, // and clone with a CLONE_NEW* flag, below
	{"keyring", []string{"keyctl", "add_key", "request_key"}},
	{"bpf", []string{"bpf"}},
	{"perf", []string{"perf_event_open"}},
	{"kernel modules", []string{"init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load"}},
	{"kernel state", []string{"reboot", "swapon", "swapoff", "syslog", "acct", "settimeofday", "clock_settime",
		"clock_adjtime", "adjtimex", "quotactl", "open_by_handle_at", "name_to_handle_at", "userfaultfd",
		"io_uring_setup", "io_uring_enter", "io_uring_register"}},
}

// cloneNewFlags are clone's namespace flags (CLONE_NEWNS, CLONE_NEWCGROUP,
// CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET).
const cloneNewFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// seccompPolicy is the filter as a policy: allow by default, deny the
// classes above, clone with a namespace flag, and every socket that is not
// a Unix socket (the sandbox has no network; raw and packet sockets, netlink
// and IP sockets all stay closed).
func seccompPolicy() seccomp.Policy {
	var names []string
	for _, c := range deniedSyscalls {
		names = append(names, c.names...)
	}
	return seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			{Action: seccomp.ActionErrno, Names: names},
			{Action: seccomp.ActionErrno, NamesWithCondtions: []seccomp.NameWithConditions{
				{Name: "clone", Conditions: seccomp.ArgumentConditions{
					{Argument: 0, Operation: seccomp.BitsSet, Value: cloneNewFlags}}},
				{Name: "socket", Conditions: seccomp.ArgumentConditions{
					{Argument: 0, Operation: seccomp.NotEqual, Value: unix.AF_UNIX}}},
			}},
			{Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS), Names: []string{"clone3"}},
		},
	}
}

// seccompFilter assembles the policy once. The library's program lets a
// call of another architecture's ABI (i386's int 0x80 on x86-64) through to
// the default action; the prefix here kills the process instead, so the
// deny list cannot be walked around.
var seccompFilter = sync.OnceValues(func() ([]bpf.RawInstruction, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, fmt.Errorf("%w: seccomp: %w", ErrSetup, err)
	}
	policy := seccompPolicy()
	prog, err := policy.Assemble()
	if err != nil {
		return nil, fmt.Errorf("%w: seccomp: %w", ErrSetup, err)
	}
	const archOffset = 4 // offsetof(struct seccomp_data, arch)
	prefix := []bpf.Instruction{
		bpf.LoadAbsolute{Off: archOffset, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: uint32(seccomp.ActionKillProcess)},
	}
	raw, err := bpf.Assemble(append(prefix, prog...))
	if err != nil {
		return nil, fmt.Errorf("%w: seccomp: %w", ErrSetup, err)
	}
	return raw, nil
})

// seccompBytes is the filter as the kernel's struct sock_filter array, what
// bwrap's --seccomp reads from a descriptor.
func seccompBytes() ([]byte, error) {
	raw, err := seccompFilter()
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, 8*len(raw))
	for _, ins := range raw {
		b = binary.NativeEndian.AppendUint16(b, ins.Op)
		b = append(b, ins.Jt, ins.Jf)
		b = binary.NativeEndian.AppendUint32(b, ins.K)
	}
	return b, nil
}

// seccompFile returns a pipe's read end holding the filter, for bwrap's
// --seccomp. The filter is far below a pipe's capacity, so it is written
// whole before bwrap starts.
func seccompFile() (*os.File, error) {
	b, err := seccompBytes()
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("%w: seccomp pipe: %w", ErrSetup, err)
	}
	_, err = w.Write(b)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("%w: seccomp pipe: %w", ErrSetup, err)
	}
	return r, nil
}

// loadSeccomp installs the filter on this process, every thread of it
// (TSYNC: the Go runtime's threads too), with no_new_privs set. The
// namespaces helper calls it right before exec, the jq helper before it
// reads its expression.
func loadSeccomp() error {
	raw, err := seccompFilter()
	if err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	filters := make([]unix.SockFilter, len(raw))
	for i, ins := range raw {
		filters[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
	}
	prog := unix.SockFprog{Len: uint16(len(filters)), Filter: &filters[0]}
	// With TSYNC a thread that cannot take the filter is named by its id
	// in the return value, without an errno.
	r, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC,
		uintptr(unsafe.Pointer(&prog)))
	switch {
	case e != 0:
		return fmt.Errorf("seccomp: %w", e)
	case r != 0:
		return fmt.Errorf("seccomp: thread %d could not take the filter", r)
	}
	return nil
}
