//go:build unix && !linux

package testservers

import (
	"os"
	"os/exec"
	"syscall"
)

// procAttr puts a server in a process group of its own. Only Linux can
// tie its life to the test binary's; elsewhere Stop (run by t.Cleanup)
// ends it.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// kill kills the server's process group.
func kill(cmd *exec.Cmd) { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }

var sigStop, sigCont os.Signal = syscall.SIGSTOP, syscall.SIGCONT
