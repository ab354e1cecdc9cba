// Package testservers starts the real servers the tests run against: a
// Vault dev server, local-kms (the AWS KMS API), and Redis, each as a
// process of its own on a free loopback port, stopped when the test ends.
//
// scripts/install-servers.sh installs them into a cache outside the work
// tree (Vault takes about ten minutes to build, once per machine). A test
// that needs a server that is not installed fails under CI=true, and is
// skipped elsewhere with the command that installs it.
package testservers

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Pinned versions: scripts/install-servers.sh builds these names.
const (
	VaultBinary    = "vault-v1.21.0"
	LocalKMSBinary = "local-kms-v0.0.0-20260228092603-2a5e92d09ab6"
	RedisBinary    = "redis-server"
)

// Dir is where scripts/install-servers.sh puts the binaries:
// $STATESEAL_SERVERS, else $XDG_CACHE_HOME/stateseal/bin, else
// ~/.cache/stateseal/bin.
func Dir() string {
	if d := os.Getenv("STATESEAL_SERVERS"); d != "" {
		return d
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "stateseal", "bin")
}

// findBinary finds name in Dir, then on PATH. Missing, it fails the test in CI
// and skips it elsewhere.
func findBinary(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(Dir(), name)
	if _, err := os.Stat(p); err == nil {
		return p
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	msg := fmt.Sprintf("%s is not installed in %s: run 'bash scripts/install-servers.sh' (Vault builds in about ten minutes, once per machine)", name, Dir())
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// FreePort returns a loopback port nothing listens on now.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// A Process is a server the test started.
type Process struct {
	t    testing.TB
	name string
	path string
	args []string
	env  []string
	Port int
	cmd  *exec.Cmd
	log  *os.File
}

func start(t testing.TB, name, path string, port int, env []string, args ...string) *Process {
	p := &Process{t: t, name: name, path: path, args: args, env: env, Port: port}
	log, err := os.CreateTemp(t.TempDir(), name+"-*.log")
	if err != nil {
		t.Fatal(err)
	}
	p.log = log
	p.Start()
	t.Cleanup(p.Stop)
	return p
}

// Start starts the process (again) on its port and waits until it
// accepts connections.
func (p *Process) Start() {
	p.t.Helper()
	if err := p.tryStart(); err != nil {
		p.t.Fatal(err)
	}
}

// errPortTaken is a process that could not bind a port chosen free a
// moment before: another test's server took it meanwhile.
var errPortTaken = errors.New("a port was taken before the server bound it")

// tryStart is Start, returning errPortTaken (the process stopped) when
// the server says a port it was given is in use.
func (p *Process) tryStart() error {
	cmd := exec.Command(p.path, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = p.log, p.log
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %v", p.name, err)
	}
	p.cmd = cmd
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port))
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		out, _ := os.ReadFile(p.log.Name())
		if bytes.Contains(out, []byte("Address already in use")) {
			p.Stop()
			return errPortTaken
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not listen on %s within 60 s:\n%s", p.name, addr, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop kills the process and waits for it to exit.
func (p *Process) Stop() {
	if p.cmd == nil {
		return
	}
	kill(p.cmd)
	p.cmd.Wait()
	p.cmd = nil
}

// Freeze hangs the process (SIGSTOP) with its connections open, as a
// server stuck in a long pause looks to its clients; Thaw lets it go on
// (SIGCONT). Unix only: elsewhere the test is skipped.
func (p *Process) Freeze() { p.t.Helper(); p.Signal(sigStop) }

// Thaw lets a frozen process go on.
func (p *Process) Thaw() { p.t.Helper(); p.Signal(sigCont) }

// Signal sends sig to the running process.
func (p *Process) Signal(sig os.Signal) {
	p.t.Helper()
	if p.cmd == nil {
		p.t.Fatalf("%s is not running", p.name)
	}
	if sig == nil {
		p.t.Skip("this platform cannot freeze a process")
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %v to %s: %v", sig, p.name, err)
	}
}

// Addr is the server's loopback address, host:port.
func (p *Process) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port)) }

// SysProcAttr is what a test gives a child process (a server, or the test
// binary re-executed) so that it dies with the test where the platform
// allows it (Linux), in a process group of its own on Unix.
func SysProcAttr() *syscall.SysProcAttr { return procAttr() }
