package procs

import (
	"os/exec"
	"syscall"
)

// setPdeathsig kills the child when the parent dies, so an interrupted
// harness leaves no role processes behind.
func setPdeathsig(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
