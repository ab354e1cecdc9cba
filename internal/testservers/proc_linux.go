package testservers

import (
	"os"
	"os/exec"
	"syscall"
)

// procAttr makes a server die with the test binary, even on SIGKILL, in a
// process group of its own.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

// kill kills the server's process group.
func kill(cmd *exec.Cmd) { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }

var sigStop, sigCont os.Signal = syscall.SIGSTOP, syscall.SIGCONT
