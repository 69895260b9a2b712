package procs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/agentbus/agentbus/cmd/internal/app"
)

// Module is the import path of the agentbus module.
const Module = "github.com/agentbus/agentbus"

// DevModule is the import path of the development module in cmd/dev
// (DevModuleDir from the repository root): what only development needs,
// such as the benchmark's Restate peer, kept out of Module's requirements.
const DevModule = Module + "/cmd/dev"

// DevModuleDir is the directory of DevModule, relative to the repository
// root.
const DevModuleDir = "cmd/dev"

// Roles are the binaries of a deployment, each built from cmd/<name>: the
// role processes and the ingress.
var Roles = func() []string {
	var names []string
	for _, p := range app.Processes {
		names = append(names, p.Name)
	}
	return append(names, "ingress")
}()

// Build compiles the main packages pkgs (import paths) into dir with one
// `go build`, each binary named after the last element of its path. It
// runs in the module that contains the current directory.
func Build(ctx context.Context, dir string, pkgs ...string) error {
	return BuildIn(ctx, "", dir, pkgs...)
}

// BuildIn is Build run in the module that contains moduleDir (the current
// directory when moduleDir is empty), such as DevModuleDir.
func BuildIn(ctx context.Context, moduleDir, dir string, pkgs ...string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	args := append([]string{"build", "-o", abs + string(filepath.Separator)}, pkgs...)
	build := exec.CommandContext(ctx, "go", args...)
	build.Dir = moduleDir
	out, err := build.CombinedOutput()
	if err != nil {
		return fmt.Errorf("procs: go build %v: %v\n%s", pkgs, err, out)
	}
	for _, p := range pkgs {
		if _, err := os.Stat(filepath.Join(abs, path.Base(p))); err != nil {
			return fmt.Errorf("procs: build %s: %w", p, err)
		}
	}
	return nil
}

// BuildRoles compiles the five role binaries into dir, plus the agentbus
// command when withAgentbus is set.
func BuildRoles(ctx context.Context, dir string, withAgentbus bool) error {
	var pkgs []string
	for _, r := range Roles {
		pkgs = append(pkgs, Module+"/cmd/"+r)
	}
	if withAgentbus {
		pkgs = append(pkgs, Module+"/cmd/agentbus")
	}
	return Build(ctx, dir, pkgs...)
}

// Spec says how to start a process.
type Spec struct {
	Name string   // for messages
	Path string   // the binary
	Args []string // arguments after the binary
	Env  []string // added to the current environment; later entries win
	// Output receives stdout and stderr. Nil discards them.
	Output io.Writer
}

// Proc is one running OS process.
type Proc struct {
	Spec
	cmd  *exec.Cmd
	done chan struct{}
	err  error // the exit status, set before done is closed

	mu      sync.Mutex
	stopped bool // SIGSTOPped and not yet continued
}

// Start starts a process for spec.
func Start(spec Spec) (*Proc, error) {
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Env = append(os.Environ(), spec.Env...)
	out := spec.Output
	if out == nil {
		out = io.Discard
	}
	cmd.Stdout, cmd.Stderr = out, out
	setPdeathsig(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("procs: start %s: %w", spec.Name, err)
	}
	p := &Proc{Spec: spec, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Pid returns the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// ExitErr returns the exit status once the process has exited.
func (p *Proc) ExitErr() error {
	<-p.done
	return p.err
}

// Signal sends sig. SIGSTOP and SIGCONT are tracked, so Stop can resume a
// stopped process before asking it to exit.
func (p *Proc) Signal(sig syscall.Signal) error {
	if p.Exited() {
		return errors.New("procs: " + p.Name + " has exited")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.cmd.Process.Signal(sig); err != nil {
		return err
	}
	switch sig {
	case syscall.SIGSTOP:
		p.stopped = true
	case syscall.SIGCONT:
		p.stopped = false
	}
	return nil
}

// Kill sends SIGKILL and waits for the exit.
func (p *Proc) Kill() {
	_ = p.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop sends sig (continuing the process first if it is stopped) and
// waits up to grace for it to exit, then kills it.
func (p *Proc) Stop(sig syscall.Signal, grace time.Duration) {
	if p.Exited() {
		return
	}
	p.mu.Lock()
	stopped := p.stopped
	p.mu.Unlock()
	_ = p.Signal(sig)
	if stopped && sig != syscall.SIGKILL {
		_ = p.Signal(syscall.SIGCONT)
	}
	select {
	case <-p.done:
	case <-time.After(grace):
		p.Kill()
	}
}
