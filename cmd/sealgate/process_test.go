package main

// Whole processes for the single-use cases of issue 23: the sealgate
// binary the image runs (imageBinary), and "pay" upstreams that are this
// test binary started again (TestMain), so that kill -9 is real. An
// upstream appends every state it executes to a ledger file; the tests
// count executions per state from it.

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"github.com/stateseal/stateseal/internal/testkit"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	if ledger := os.Getenv("SEALGATE_TEST_PAY_LEDGER"); ledger != "" {
		servePay(ledger, os.Getenv("SEALGATE_TEST_PAY_ADDR"))
		return
	}
	os.Exit(m.Run())
}

// servePay is the pay upstream: a tools/call of "pay" without a state
// asks for confirmation with a fresh state "pay:<random>"; with a state,
// it executes it (appends it to the ledger, synced), after sleeping for
// the arguments' "ms" if any, and answers "paid".
func servePay(ledger, addr string) {
	f, err := os.OpenFile(ledger, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_SYNC, 0o644)
	if err != nil {
		panic(err)
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		panic(err)
	}
	fmt.Printf("listening http://%s\n", ln.Addr())
	var mu sync.Mutex
	http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg struct {
			ID     json.RawMessage
			Method string
			Params struct {
				RequestState string
				Arguments    struct {
					MS int
					// Cut: the upstream stops, unpaid, when its client
					// goes before the MS are up.
					Cut bool
				}
			}
		}
		testkit.Check(json.NewDecoder(r.Body).Decode(&msg))
		res := `{"resultType":"input_required","inputRequests":{"ok":{"method":"elicitation/create","params":{"message":"Pay?"}}},"requestState":"pay:` + rand.Text() + `"}`
		if msg.Method == "server/discover" { // what sealgate's bridge asks for a 2025 client's initialize
			res = `{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"serverInfo":{"name":"pay","version":"1"}}`
		}
		if s := msg.Params.RequestState; s != "" {
			if msg.Params.Arguments.MS > 0 {
				testkit.Check(os.WriteFile(ledger+".running", []byte(s), 0o644))
			}
			done := time.After(time.Duration(msg.Params.Arguments.MS) * time.Millisecond)
			select {
			case <-done:
			case <-r.Context().Done():
				if msg.Params.Arguments.Cut {
					return
				}
				<-done
			}
			mu.Lock()
			_ = testkit.Must(f.WriteString(s + "\n"))
			mu.Unlock()
			res = `{"content":[{"type":"text","text":"paid"}]}`
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":`+res+`}`)
	}))
}

// payUpstream is one upstream process.
type payUpstream struct {
	t      *testing.T
	ledger string
	addr   string // host:port, kept across restarts
	cmd    *exec.Cmd
}

func startPay(t *testing.T, ledger string) *payUpstream {
	p := &payUpstream{t: t, ledger: ledger}
	p.start()
	t.Cleanup(func() { p.kill() })
	return p
}

func (p *payUpstream) URL() string { return "http://" + p.addr }

func (p *payUpstream) start() {
	p.t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "SEALGATE_TEST_PAY_LEDGER="+p.ledger, "SEALGATE_TEST_PAY_ADDR="+p.addr)
	out := testkit.Must(cmd.StdoutPipe())
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		p.t.Fatalf("pay upstream: %v", err)
	}
	p.addr = strings.TrimPrefix(strings.TrimSpace(strings.TrimPrefix(line, "listening ")), "http://")
	p.cmd = cmd
}

// kill is kill -9.
func (p *payUpstream) kill() {
	if p.cmd != nil {
		p.cmd.Process.Signal(syscall.SIGKILL)
		p.cmd.Wait()
		p.cmd = nil
	}
}

// executions counts the ledger's lines per state.
func executions(t *testing.T, ledger string) map[string]int {
	t.Helper()
	b := testkit.Must(os.ReadFile(ledger))
	n := map[string]int{}
	for _, l := range strings.Fields(string(b)) {
		n[l]++
	}
	return n
}

// gatewayProc is one sealgate process.
type gatewayProc struct {
	t          *testing.T
	cmd        *exec.Cmd
	proxy, adm string
	mu         sync.Mutex
	logs       bytes.Buffer
	exited     chan struct{}
}

func startGatewayProc(t *testing.T, args ...string) *gatewayProc {
	t.Helper()
	bin := imageBinary(t)
	args = append([]string{"-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0", "-audience", "https://pay.test",
		"-principal", "anonymous", "-poll", "200ms", "-shutdown-timeout", "5s"}, args...)
	g := &gatewayProc{t: t, cmd: exec.Command(bin, args...), exited: make(chan struct{})}
	g.cmd.Env = []string{}
	stderr := testkit.Must(g.cmd.StderrPipe())
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addrs := make(chan struct{})
	go func() {
		defer close(g.exited)
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			g.mu.Lock()
			g.logs.Write(append(sc.Bytes(), '\n'))
			g.mu.Unlock()
			var l struct{ Msg, Addr string }
			testkit.Check(json.Unmarshal(sc.Bytes(), &l))
			switch l.Msg {
			case "sealgate: admin endpoints":
				g.adm = l.Addr
			case "sealgate: proxying":
				g.proxy = l.Addr
			}
			if !sent && g.adm != "" && g.proxy != "" {
				sent = true
				close(addrs)
			}
		}
		g.cmd.Wait()
	}()
	t.Cleanup(func() { g.cmd.Process.Kill(); <-g.exited })
	select {
	case <-addrs:
	case <-g.exited:
		t.Fatalf("sealgate exited: %s", g.Logs())
	case <-time.After(30 * time.Second):
		t.Fatal("sealgate did not start")
	}
	waitFor(t, "readiness", func() bool {
		resp, err := http.Get(g.adm + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return g
}

func (g *gatewayProc) Logs() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.logs.String()
}

// stop is SIGTERM, then waiting for the exit.
func (g *gatewayProc) stop() {
	g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.exited:
	case <-time.After(30 * time.Second):
		g.t.Fatal("sealgate did not stop")
	}
}

// answer is what a client got for one round.
type answer struct {
	status int
	state  string // the result's requestState
	paid   bool
	code   int
	msg    string
	reason string
}

func (a answer) String() string {
	if a.code != 0 {
		return fmt.Sprintf("%d %d %q reason=%q", a.status, a.code, a.msg, a.reason)
	}
	return fmt.Sprintf("%d state=%t paid=%t", a.status, a.state != "", a.paid)
}

var rpcID int64
var rpcMu sync.Mutex

// pay sends one round of tools/call "pay" through gw: no state for the
// first round, else the state and a confirmation.
func pay(t *testing.T, gw, state string, ms int) answer {
	t.Helper()
	return payArgs(t, gw, state, map[string]any{"ms": ms})
}

// payArgs is pay with the arguments given.
func payArgs(t *testing.T, gw, state string, args map[string]any) answer {
	t.Helper()
	rpcMu.Lock()
	rpcID++
	id := rpcID
	rpcMu.Unlock()
	params := map[string]any{"name": "pay", "arguments": args}
	if state != "" {
		params["requestState"] = state
		params["inputResponses"] = map[string]any{"ok": map[string]any{"action": "accept"}}
	}
	b := testkit.Must(json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}))
	req := testkit.Must(http.NewRequest("POST", gw+"/mcp", bytes.NewReader(b)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{msg: err.Error()}
	}
	defer resp.Body.Close()
	body := testkit.Must(io.ReadAll(resp.Body))
	var m struct {
		Result struct {
			RequestState string
			Content      []struct{ Text string }
		}
		Error struct {
			Code    int
			Message string
			Data    struct{ Reason string }
		}
	}
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("answer %d %q: %v", resp.StatusCode, body, err)
	}
	return answer{status: resp.StatusCode, state: m.Result.RequestState, paid: len(m.Result.Content) > 0 && m.Result.Content[0].Text == "paid",
		code: m.Error.Code, msg: m.Error.Message, reason: m.Error.Data.Reason}
}

// confirmable runs a first round and returns its state.
func confirmable(t *testing.T, gw string) string {
	t.Helper()
	a := pay(t, gw, "", 0)
	if a.state == "" {
		t.Fatalf("first round: %v", a)
	}
	return a.state
}

func newLedger(t *testing.T) string { return t.TempDir() + "/ledger" }

// keysetDir makes a keyset file with sealctl, for gateways that must
// open each other's states, or their own after a restart.
func keysetDir(t *testing.T) string {
	dir := t.TempDir()
	sealctl(t, dir, "init")
	return dir + "/keyset.json"
}
