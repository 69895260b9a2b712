//go:build !linux

package procs

import "os/exec"

func setPdeathsig(*exec.Cmd) {}
