//go:build !unix

package testservers

import (
	"os/exec"
	"syscall"
)

func procAttr() *syscall.SysProcAttr { return nil }

func kill(cmd *exec.Cmd) { cmd.Process.Kill() }
