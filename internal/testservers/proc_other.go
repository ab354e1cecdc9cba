//go:build !unix

package testservers

import (
	"os"
	"os/exec"
	"syscall"
)

func procAttr() *syscall.SysProcAttr { return nil }

func kill(cmd *exec.Cmd) { cmd.Process.Kill() }

// No SIGSTOP here: Freeze and Thaw skip the test.
var sigStop, sigCont os.Signal
