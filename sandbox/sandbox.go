package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"
)

// probeTimeout bounds each isolation probe run by New.
const probeTimeout = 20 * time.Second

// Sandbox runs extraction scripts for the large-response path. It is safe for
// concurrent use; each call runs in its own namespaces and process tree.
type Sandbox struct {
	cfg  Config
	mode string
	py   pythonInstall
	// bwrap and prlimit are the tools' paths, empty when not installed.
	bwrap, prlimit string
	limits         limits
	// asRoot is true when this process runs as root: scripts then run as
	// cfg.UID/cfg.GID and task files are chowned to them.
	asRoot         bool
	runUID, runGID int
}

// pythonInstall is the resolved interpreter: the executable and the host
// directories (outside the system dirs) that must be mounted read-only.
type pythonInstall struct {
	exe   string
	extra []string
}

// New validates cfg, prepares cfg.Root and selects an isolation mechanism by
// running a probe script under it. The probe also checks that the isolation
// holds (no network interface but lo, no /etc, no capabilities). When no
// mechanism works and cfg does not allow running unconfined, New fails closed
// with ErrNoIsolation.
func New(cfg Config) (*Sandbox, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Sandbox{cfg: cfg, asRoot: os.Geteuid() == 0, runUID: os.Geteuid(), runGID: os.Getegid()}
	if s.asRoot {
		s.runUID, s.runGID = cfg.UID, cfg.GID
	}
	s.limits = limits{
		AS: cfg.MemoryBytes, CPU: int64(cfg.CPUSeconds), FSize: cfg.FileSizeBytes,
		NProc: int64(cfg.MaxProcs), NoFile: maxOpenFiles,
	}
	s.bwrap, _ = exec.LookPath("bwrap")
	s.prlimit, _ = exec.LookPath("prlimit")
	if err := s.prepareRoot(); err != nil {
		return nil, err
	}
	py, err := resolvePython(cfg.Python)
	if err != nil {
		return nil, err
	}
	s.py = py

	modes := []string{cfg.Isolation}
	if cfg.Isolation == IsolationAuto {
		modes = []string{IsolationBwrap, IsolationNamespaces}
	}
	var errs []error
	for _, m := range modes {
		err := s.probe(m)
		if err == nil {
			s.mode = m
			return s, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", m, err))
	}
	if cfg.Isolation == IsolationAuto && cfg.AllowUnsafeNoIsolation {
		if err := s.probe(IsolationNone); err == nil {
			s.mode = IsolationNone
			return s, nil
		}
	}
	if cfg.Isolation == IsolationNone {
		return nil, fmt.Errorf("%w: %w", ErrSetup, errors.Join(errs...))
	}
	return nil, fmt.Errorf("%w: %w", ErrNoIsolation, errors.Join(errs...))
}

// Isolation reports the mechanism in use: IsolationBwrap,
// IsolationNamespaces or IsolationNone.
func (s *Sandbox) Isolation() string { return s.mode }

// Config returns the effective configuration, defaults applied.
func (s *Sandbox) Config() Config { return s.cfg }

// prepareRoot creates cfg.Root and checks that nobody else controls it. As
// root it is 0711 so the unprivileged script uid can reach its own task dir by
// path (bwrap needs that) without listing the others.
func (s *Sandbox) prepareRoot() error {
	mode := os.FileMode(0o700)
	if s.asRoot {
		mode = 0o711
	}
	if err := os.MkdirAll(s.cfg.Root, mode); err != nil {
		return fmt.Errorf("%w: root: %w", ErrSetup, err)
	}
	fi, err := os.Lstat(s.cfg.Root)
	if err != nil {
		return fmt.Errorf("%w: root: %w", ErrSetup, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: root %s is not a directory", ErrSetup, s.cfg.Root)
	}
	if uid, ok := fileOwner(fi); ok && uid != os.Geteuid() {
		return fmt.Errorf("%w: root %s is owned by uid %d, not by this process", ErrSetup, s.cfg.Root, uid)
	}
	if fi.Mode().Perm() != mode {
		if err := os.Chmod(s.cfg.Root, mode); err != nil {
			return fmt.Errorf("%w: root: %w", ErrSetup, err)
		}
	}
	return nil
}

// probeScript checks, from inside the sandbox, that the isolation holds.
// The interfaces come from /proc/net/dev (the seccomp filter refuses the
// netlink socket socket.if_nameindex opens).
const probeScript = `import json, os, sys
status = open("/proc/self/status").read().splitlines()
caps = [l.split()[1] for l in status if l.startswith(("CapEff", "CapPrm", "CapBnd"))]
seccomp = [l.split()[1] for l in status if l.startswith("Seccomp:")]
ifaces = [l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:]]
print(json.dumps({"input": open(sys.argv[1]).read(), "etc": os.path.exists("/etc"),
  "ifaces": ifaces, "caps": caps, "seccomp": seccomp[0] if seccomp else "", "uid": os.getuid()}))`

// probe runs probeScript under mode and checks what it reports.
func (s *Sandbox) probe(mode string) error {
	saved := s.mode
	s.mode = mode
	defer func() { s.mode = saved }()
	t, err := s.newTask("probe")
	if err != nil {
		return err
	}
	defer t.Close()
	id, err := t.WriteTemp([]byte("ok"))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	res, err := s.ExecPython(ctx, t, probeScript, id)
	if err != nil {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(res.Stderr)))
	}
	var got struct {
		Input   string
		Etc     bool
		Ifaces  []string
		Caps    []string
		Seccomp string
		UID     int
	}
	if err := json.Unmarshal(res.Output, &got); err != nil {
		return fmt.Errorf("probe output %q: %w", res.Output, err)
	}
	if got.Input != "ok" {
		return fmt.Errorf("probe could not read its input file")
	}
	if mode == IsolationNone {
		return nil
	}
	if got.Etc || len(got.Ifaces) != 1 || got.Ifaces[0] != "lo" {
		return fmt.Errorf("isolation not effective: /etc visible=%v, interfaces=%v", got.Etc, got.Ifaces)
	}
	for _, c := range got.Caps {
		if strings.Trim(c, "0") != "" {
			return fmt.Errorf("isolation not effective: capabilities %v", got.Caps)
		}
	}
	if got.Seccomp != "2" { // SECCOMP_MODE_FILTER
		return fmt.Errorf("isolation not effective: seccomp mode %q, want the filter (2)", got.Seccomp)
	}
	return nil
}

// resolvePython asks the configured interpreter (on the host, with the host
// environment: this is trusted configuration) for its executable and prefixes.
// An empty name prefers the system /usr/bin/python3.
func resolvePython(name string) (pythonInstall, error) {
	if name == DefaultPython {
		if _, err := os.Stat("/usr/bin/python3"); err == nil {
			name = "/usr/bin/python3"
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, "-I", "-c",
		"import sys, json; print(json.dumps([sys.executable, sys.base_prefix, sys.prefix]))").Output()
	if err != nil {
		return pythonInstall{}, fmt.Errorf("%w: python %q: %w", ErrSetup, name, err)
	}
	var paths []string
	if err := json.Unmarshal(out, &paths); err != nil || len(paths) != 3 || !filepath.IsAbs(paths[0]) {
		return pythonInstall{}, fmt.Errorf("%w: python %q reported %q", ErrSetup, name, out)
	}
	py := pythonInstall{exe: paths[0]}
	real, err := filepath.EvalSymlinks(paths[0])
	if err != nil {
		return pythonInstall{}, fmt.Errorf("%w: python: %w", ErrSetup, err)
	}
	for _, p := range []string{paths[1], paths[2], filepath.Dir(real)} {
		if p, err = filepath.EvalSymlinks(p); err == nil {
			py.addExtra(p)
		}
	}
	return py, nil
}

// addExtra records dir as needing a read-only mount unless a system dir or
// an already recorded dir covers it.
func (py *pythonInstall) addExtra(dir string) {
	for _, d := range systemDirs {
		if within(dir, d) {
			return
		}
	}
	for _, d := range py.extra {
		if within(dir, d) {
			return
		}
	}
	py.extra = append(py.extra, dir)
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+"/")
}

// systemDirs are mounted read-only (or recreated as the same symlinks) in the
// sandbox. Nothing else of the host filesystem is visible, in particular not /etc.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// devices are bound into the sandbox's /dev.
var devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"}
