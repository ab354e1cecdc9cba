//go:build linux

package main

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/json"
	"fmt"
	"github.com/stateseal/stateseal/internal/testkit"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestImageBinary builds sealgate as cmd/sealgate/Dockerfile does (its RUN
// line, word for word) and starts it as that image would: statically
// linked (no program interpreter, no libc), in an empty root directory
// (chroot: no shell, no /etc, no /tmp), as user 65532, with an empty
// environment. It must become ready and seal a state for a request it
// proxies. There is no container engine here: as root the test chroots
// and drops to 65532; otherwise it chroots inside a user namespace of its
// own; where neither is allowed it runs the binary in an empty working
// directory with an empty environment, and says so.
func TestImageBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	root := t.TempDir()
	testkit.Check(os.Chmod(root, 0o755)) // the unprivileged user must reach /sealgate
	bin, err := os.ReadFile(imageBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "sealgate"), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(filepath.Join(root, "sealgate"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Fatalf("the binary is dynamically linked (program header %v)", p.Type)
		}
	}
	f.Close()

	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg struct{ ID json.RawMessage }
		testkit.Check(json.NewDecoder(r.Body).Decode(&msg))
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":{"resultType":"input_required","inputRequests":{},"requestState":"plain"}}`)
	}))
	defer up.Close()
	cmd := exec.Command("/sealgate", "-upstream", up.URL, "-audience", "https://image.test", "-principal", "anonymous",
		"-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0")
	cmd.Env = []string{}
	cmd.Dir = "/"
	mode := "chroot, user 65532"
	switch {
	case os.Geteuid() == 0:
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: 65532, Gid: 65532}}
	default:
		mode = "chroot in a user namespace"
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Cloneflags: syscall.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}}
	}
	stderr := testkit.Must(cmd.StderrPipe())
	if err := cmd.Start(); err != nil {
		if os.Geteuid() == 0 {
			t.Fatalf("start in %s: %v", mode, err)
		}
		// Unprivileged user namespaces may be off (Ubuntu's AppArmor
		// restriction, a container): the most this machine allows.
		mode = fmt.Sprintf("empty working directory and environment, no chroot (%s: %v)", mode, err)
		cmd = exec.Command(filepath.Join(root, "sealgate"), cmd.Args[1:]...)
		cmd.Env, cmd.Dir = []string{}, t.TempDir()
		stderr = testkit.Must(cmd.StderrPipe())
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("sealgate started: %s", mode)
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	addrs := make(chan [2]string, 1)
	var logs bytes.Buffer
	go func() {
		var admin, proxy string
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs.Write(append(sc.Bytes(), '\n'))
			var l struct{ Msg, Addr string }
			testkit.Check(json.Unmarshal(sc.Bytes(), &l))
			switch l.Msg {
			case "sealgate: admin endpoints":
				admin = l.Addr
			case "sealgate: proxying":
				proxy = l.Addr
			}
			if admin != "" && proxy != "" {
				addrs <- [2]string{admin, proxy}
				admin = ""
			}
		}
		close(addrs)
	}()
	var a [2]string
	select {
	case got, ok := <-addrs:
		if !ok {
			cmd.Wait()
			t.Fatalf("sealgate exited (%v): %s", cmd.ProcessState, logs.String())
		}
		a = got
	case <-time.After(30 * time.Second):
		t.Fatal("sealgate did not start")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(a[0] + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	req := testkit.Must(http.NewRequest("POST", a[1]+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"book","arguments":{}}}`)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := testkit.Must(io.ReadAll(resp.Body))
	resp.Body.Close()
	var got struct {
		Result struct{ RequestState string }
	}
	testkit.Check(json.Unmarshal(body, &got))
	if resp.StatusCode != 200 || got.Result.RequestState == "" || got.Result.RequestState == "plain" {
		t.Fatalf("a call through the image's binary: %d %s", resp.StatusCode, body)
	}
}
