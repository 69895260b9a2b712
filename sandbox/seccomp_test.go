//go:build linux

package sandbox

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// seccompProbe is one system call a script makes through ctypes, and the
// errno the filter must answer it with. Where the call would succeed, or
// fail with another errno, without the filter (the comment says how), the
// probe shows that the filter is what refused it.
type seccompProbe struct {
	name, class string
	call        string // syscall(<nr>, <args>) arguments after the number
	errno       unix.Errno
}

var seccompProbes = []seccompProbe{
	{"ptrace_traceme", "ptrace", "ptrace, 0, 0, 0, 0", unix.EPERM}, // succeeds unfiltered
	{"process_vm_readv", "ptrace", "process_vm_readv, os.getpid(), 0, 0, 0, 0, 0", unix.EPERM},
	{"mount_tmpfs", "mount", `mount, b"none", b"/tmp", b"tmpfs", 0, 0`, unix.EPERM},
	{"umount", "mount", `umount2, b"/task", 0`, unix.EPERM},
	{"setns", "namespaces", "setns, -1, 0", unix.EPERM}, // EBADF unfiltered
	{"unshare_user", "namespaces", "unshare, 0x10000000", unix.EPERM},
	{"clone_newnet", "namespaces", "clone, 0x40000000 | 17, 0, 0, 0, 0", unix.EPERM},
	{"clone3", "namespaces", "clone3, 0, 0", unix.ENOSYS}, // EINVAL unfiltered
	{"keyctl", "keyring", "keyctl, 0, -3, 0", unix.EPERM}, // the session keyring's id unfiltered
	{"add_key", "keyring", `add_key, b"user", b"k", b"v", 1, -3`, unix.EPERM},
	{"bpf", "bpf", "bpf, 0, 0, 0", unix.EPERM},
	{"perf_event_open", "perf", "perf_event_open, 0, 0, -1, -1, 0", unix.EPERM}, // EFAULT unfiltered
	{"init_module", "kernel modules", `init_module, 0, 0, b""`, unix.EPERM},
	{"finit_module", "kernel modules", `finit_module, -1, b"", 0`, unix.EPERM},
	{"delete_module", "kernel modules", `delete_module, b"loop", 0`, unix.EPERM},
	{"socket_raw", "raw sockets", "socket, 2, 3, 1", unix.EPERM},
	{"socket_packet", "raw sockets", "socket, 17, 3, 0", unix.EPERM},
	{"socket_inet_stream", "raw sockets", "socket, 2, 1, 0", unix.EPERM}, // a socket unfiltered
	{"socket_netlink", "raw sockets", "socket, 16, 3, 0", unix.EPERM},    // a socket unfiltered
	{"io_uring_setup", "kernel state", "io_uring_setup, 1, 0", unix.EPERM},
}

// seccompScript makes every probe and prints "name: errno" (0 when the call
// succeeded), then checks what must still work: the filter is on
// (Seccomp: 2), a Unix socket opens, a child process forks and the input
// file reads.
func seccompScript(t *testing.T) string {
	t.Helper()
	info, err := arch.GetInfo("")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString(`import ctypes, os, socket, json
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def probe(name, nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else ctypes.c_char_p(a) for a in args])
    print("%s: %d" % (name, ctypes.get_errno() if r == -1 else 0), flush=True)
`)
	for _, p := range seccompProbes {
		sysName, args, _ := strings.Cut(p.call, ", ")
		if sysName == p.call {
			args = ""
		}
		nr, ok := info.SyscallNames[sysName]
		if !ok {
			t.Fatalf("no syscall %q on %s", sysName, info.Name)
		}
		if args != "" {
			args = ", " + args
		}
		fmt.Fprintf(&b, "probe(%q, %d%s)\n", p.name, nr, args)
	}
	b.WriteString(`status = open("/proc/self/status").read()
print("seccomp_mode: " + [l.split(":")[1].strip() for l in status.splitlines() if l.startswith("Seccomp:")][0])
socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()
print("unix_socket: ok")
pid = os.fork()
if pid == 0:
    os._exit(7)
print("fork: %d" % os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
with open(input_file) as f:
    print("input_rows: %d" % len(json.load(f)))
`)
	return b.String()
}

// TestSeccompDeniesInsideSandbox: under both isolation modes every denied
// class fails inside with the filter's errno, while what extraction needs
// (a Unix socket, a child process, the input) still works.
func TestSeccompDeniesInsideSandbox(t *testing.T) {
	script := seccompScript(t)
	for _, mode := range isolatedModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			s := newSandbox(t, mode, nil)
			_, _, res, err := run(t, s, 20*time.Second, script)
			mustSucceed(t, res, err)
			got := outputLines(res.Output)
			for _, p := range seccompProbes {
				if want := fmt.Sprint(int(p.errno)); got[p.name] != want {
					t.Errorf("%s (%s): errno %q, want %s (%s)", p.name, p.class, got[p.name], want, p.errno)
				}
			}
			for k, want := range map[string]string{"seccomp_mode": "2", "unix_socket": "ok", "fork": "7", "input_rows": "3"} {
				if got[k] != want {
					t.Errorf("%s = %q, want %q\noutput: %s\nstderr: %s", k, got[k], want, res.Output, res.Stderr)
				}
			}
		})
	}
}

// TestSeccompLargeResponsePath: with the filter on, the extraction path runs
// as before: a script reads a large input and prints the fields it selects.
func TestSeccompLargeResponsePath(t *testing.T) {
	var rows []string
	for i := range 5000 {
		rows = append(rows, fmt.Sprintf(`{"item_id":%d,"name":"Item %d","category":"c%d","price":%d.5}`, i, i, i%12, i%40))
	}
	data := "[" + strings.Join(rows, ",") + "]"
	script := `import json
with open(input_file) as f:
    data = json.load(f)
print(json.dumps(sorted({x["category"] for x in data})))
`
	for _, mode := range isolatedModes {
		t.Run(mode, func(t *testing.T) {
			s := newSandbox(t, mode, nil)
			task, id := newTask(t, s, data)
			res, err := s.ExecPython(context.Background(), task, script, id)
			mustSucceed(t, res, err)
			if !strings.Contains(string(res.Output), `"c0"`) || !strings.Contains(string(res.Output), `"c11"`) {
				t.Fatalf("output %s", res.Output)
			}
		})
	}
}

// TestSeccompJQHelper: the jq helper runs under the filter too, and still
// answers.
func TestSeccompJQHelper(t *testing.T) {
	s := newSandbox(t, IsolationNamespaces, nil)
	task, id := newTask(t, s, menu)
	res, err := s.ExecJQ(context.Background(), task, `[.[] | .category]`, id)
	if err != nil {
		t.Fatalf("jq: %v (%s)", err, res.Stderr)
	}
	if !strings.Contains(string(res.Output), "dessert") {
		t.Fatalf("output %s", res.Output)
	}
}

// seccompData is struct seccomp_data laid out as the filter reads it. The
// bpf package's VM loads words big-endian while the kernel hands the filter
// native (little-endian) words, so each 32-bit word is written big-endian
// at the offset the kernel puts it: an argument's low word first.
func seccompData(nr int, archID uint32, args ...uint64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[0:], uint32(nr))
	binary.BigEndian.PutUint32(b[4:], archID)
	for i, a := range args {
		off := 16 + 8*i
		binary.BigEndian.PutUint32(b[off:], uint32(a))
		binary.BigEndian.PutUint32(b[off+4:], uint32(a>>32))
	}
	return b
}

// TestSeccompFilterDecisions runs the assembled filter in a BPF VM: another
// architecture's ABI is killed (the deny list cannot be walked around with
// i386's int 0x80), x32 numbers are refused, the argument rules of clone and
// socket decide on the flags and the family, and ordinary calls pass.
func TestSeccompFilterDecisions(t *testing.T) {
	raw, err := seccompFilter()
	if err != nil {
		t.Fatal(err)
	}
	prog, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("the filter does not disassemble")
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	info, err := arch.GetInfo("")
	if err != nil {
		t.Fatal(err)
	}
	nr := func(name string) int { return info.SyscallNames[name] }
	allow, eperm := uint32(seccomp.ActionAllow), uint32(seccomp.ActionErrno)|uint32(unix.EPERM)
	cases := []struct {
		name string
		data []byte
		want uint32
	}{
		{"read", seccompData(nr("read"), uint32(info.ID), 0, 0, 0), allow},
		{"ptrace", seccompData(nr("ptrace"), uint32(info.ID)), eperm},
		{"other arch", seccompData(nr("read"), uint32(info.ID)^1), uint32(seccomp.ActionKillProcess)},
		{"clone thread", seccompData(nr("clone"), uint32(info.ID), unix.CLONE_VM|unix.CLONE_THREAD|unix.CLONE_SIGHAND), allow},
		{"clone newpid", seccompData(nr("clone"), uint32(info.ID), unix.CLONE_NEWPID|17), eperm},
		{"clone newuser high word", seccompData(nr("clone"), uint32(info.ID), 1<<32|unix.CLONE_NEWUSER), eperm},
		{"socket unix", seccompData(nr("socket"), uint32(info.ID), unix.AF_UNIX, unix.SOCK_STREAM), allow},
		{"socket unix high word", seccompData(nr("socket"), uint32(info.ID), 1<<32|unix.AF_UNIX), eperm},
		{"socket inet6", seccompData(nr("socket"), uint32(info.ID), unix.AF_INET6, unix.SOCK_RAW), eperm},
		{"clone3", seccompData(nr("clone3"), uint32(info.ID)), uint32(seccomp.ActionErrno) | uint32(unix.ENOSYS)},
	}
	if info.ID == arch.X86_64.ID {
		cases = append(cases, struct {
			name string
			data []byte
			want uint32
		}{"x32 read", seccompData(nr("read")|0x40000000, uint32(info.ID)), uint32(seccomp.ActionErrno) | uint32(unix.ENOSYS)})
	}
	for _, c := range cases {
		got, err := vm.Run(c.data)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if uint32(got) != c.want {
			t.Errorf("%s: action %#x, want %#x", c.name, got, c.want)
		}
	}
}
