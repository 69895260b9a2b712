//go:build !linux

package sandbox

import (
	"fmt"
	"os/exec"
)

// The sandbox needs Linux namespaces; elsewhere only IsolationNone could run,
// and even that is not offered: every command fails closed.

type limits struct {
	AS, CPU, FSize, NProc, NoFile int64
}

func setProcAttrs(*exec.Cmd) {}

func closeInheritedFiles() {}

func (s *Sandbox) pythonCommand(*Task, string, []string) (*exec.Cmd, error) {
	return nil, fmt.Errorf("%w: sandbox needs Linux", ErrNoIsolation)
}

func (s *Sandbox) jqCommand(string) *exec.Cmd {
	return exec.Command("false")
}

func jqLimits(limits) error { return fmt.Errorf("%w: sandbox needs Linux", ErrNoIsolation) }

func loadSeccomp() error { return fmt.Errorf("%w: sandbox needs Linux", ErrNoIsolation) }
