// Package sandbox runs the extraction scripts of the large-response path
// (DESIGN.md §7, seed 000 §6–7): write_temp, read_lines, exec_python and
// exec_jq, over task-scoped temp dirs.
//
// Scripts are untrusted: a model wrote them, possibly steered by the very
// data they process. The sandbox is a security boundary and New fails closed
// (ErrNoIsolation) when it cannot build one, unless the explicit development
// flag Config.AllowUnsafeNoIsolation is set.
//
// # Isolation
//
// Every ExecPython call runs python3 in fresh namespaces:
//
//   - user: a fresh user namespace per call; the script runs as an
//     unprivileged host uid (the process's own, or Config.UID, default 65534,
//     when the process is root) with no capabilities, no_new_privs, and no
//     further user namespaces allowed;
//   - network: a new network namespace with only a loopback interface, so no
//     connection leaves the sandbox and DNS fails (there is no /etc either);
//   - mount: a new root on a tmpfs, read-only, holding only /usr, /bin,
//     /sbin, /lib* (read-only binds or the same symlinks), the interpreter's
//     installation when it lives outside /usr (read-only), the task dir
//     read-write at /task (the working directory; the input is
//     /task/<file id>), a /tmp tmpfs of Config.FileSizeBytes, /dev/null,
//     zero, full, random and urandom, and a /proc of the new PID namespace.
//     No /etc, no /home, no /sys, nothing of the host's /tmp;
//   - PID: the script cannot see or signal host processes, and when it
//     exits or is killed the kernel kills everything it started;
//   - IPC, UTS and cgroup namespaces are fresh too;
//   - environment: only PATH, LANG, LC_ALL, HOME, TMPDIR, TZ and two PYTHON*
//     variables; python runs with -I (isolated mode) and -B;
//   - descriptors: nothing but stdin, stdout and stderr is inherited.
//
// Two mechanisms build this. IsolationBwrap uses bubblewrap
// (deploy/sandbox/setup.sh installs it) and applies the rlimits with
// prlimit(1) inside the sandbox. IsolationNamespaces needs no bwrap: the
// current binary re-executes itself (/proc/self/exe) as a helper in
// SysProcAttr clone namespaces; the helper, uid 0 of its user namespace and so
// the unprivileged uid on the host, mounts the same root, pivots into it,
// drops every capability (bounding set, securebits, capset), sets
// no_new_privs and the rlimits, and execs python (which then sees itself as
// uid 0 and PID 1 of its namespaces, without any capability; under bwrap it
// keeps its uid and bwrap's init is PID 1). The helper is dispatched
// from this package's init function, so any binary importing the package
// can serve; neither mechanism installs a seccomp filter.
//
// Both mechanisms need the task dir and the interpreter to be reachable by
// the script uid (Root is created 0711 when running as root, and its
// ancestors must be searchable). The default interpreter is therefore the
// system /usr/bin/python3 when present.
//
// # Limits
//
// Wall time (Config.Timeout or Task.Timeout) kills the process group and with
// it the PID namespace. Stdout is read through a capped writer: at
// Config.OutputCap+1 bytes the script is killed and the call returns
// ErrOversizedOutput (Reason "oversized_output") with the first OutputCap
// bytes. Stderr is kept up to 64 KiB. RLIMIT_AS (Config.MemoryBytes),
// RLIMIT_CPU, RLIMIT_FSIZE, RLIMIT_NOFILE (256), RLIMIT_CORE (0) and
// RLIMIT_NPROC (Config.MaxProcs) apply to every script process. The kernel
// counts RLIMIT_NPROC per user namespace and uid, and the script runs as a
// non-root uid in a user namespace of its own, so the process limit holds per
// call, independent of other calls running as the same uid; no cgroup is used.
//
// # jq
//
// ExecJQ evaluates gojq expressions in a helper process (this binary
// re-executed) under the same time limit and output cap, RLIMIT_AS and
// RLIMIT_CPU, with an empty environment and as the script uid. It is not run
// inside the caller's process because gojq recurses in Go over nested values:
// an expression such as reduce range(3e6) as $i (null; [.]) | tojson
// overflows the goroutine stack, a fatal error that would take the whole
// executor down. gojq itself has no file, network, environment or module
// access with the options used here.
//
// # Temp dirs
//
// NewTask creates Root/<task id>-<random> (0700); Task.Close wipes it. Sweep
// removes task dirs not modified for an hour, and RunSweeper runs it
// periodically. File ids are opaque names matching f_<16 hex>; every host-side
// read opens them without following symlinks and only as regular files,
// because scripts control the task dir.
//
// # Unconfined mode
//
// IsolationNone (with AllowUnsafeNoIsolation) runs python3 directly with the
// rlimits, timeout, output cap and empty environment, but with full access to
// the host's network and filesystem and without killing background processes
// that leave the process group. It is for development machines only.
package sandbox
