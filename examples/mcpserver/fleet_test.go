package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/internal/testservers"
)

// TestMain runs the test binary as the example server when a fleet test
// starts it as an instance.
func TestMain(m *testing.M) {
	if args := os.Getenv("STATESEAL_MCPSERVER_ARGS"); args != "" {
		os.Args = append([]string{"mcpserver"}, strings.Fields(args)...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// instance is one example server process.
type instance struct {
	t    *testing.T
	name string
	port int
	args []string
	log  string
	cmd  *exec.Cmd
	mu   sync.Mutex
	// unready: start returns once the server answers at all, not once
	// /readyz says ready (its keyset loaded).
	unready bool
}

func startInstance(t *testing.T, name string, env []string, args ...string) *instance {
	in := &instance{t: t, name: name, port: testservers.FreePort(t), log: filepath.Join(t.TempDir(), name+".log")}
	in.args = append([]string{"-addr", "127.0.0.1:" + strconv.Itoa(in.port)}, args...)
	in.start(env)
	t.Cleanup(in.kill)
	return in
}

func (in *instance) url() string { return fmt.Sprintf("http://127.0.0.1:%d/mcp", in.port) }

func (in *instance) start(env []string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	f, err := os.OpenFile(in.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		in.t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), env...), "STATESEAL_MCPSERVER_ARGS="+strings.Join(in.args, " "))
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = testservers.SysProcAttr()
	if err := cmd.Start(); err != nil {
		in.t.Fatal(err)
	}
	in.cmd = cmd
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", in.port))
		if err == nil {
			resp.Body.Close()
			if in.unready || resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			out := testkit.Must(os.ReadFile(in.log))
			in.t.Fatalf("%s did not start:\n%s", in.name, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill sends SIGKILL, as a crash or an OOM kill would.
func (in *instance) kill() {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.cmd != nil {
		in.cmd.Process.Kill()
		in.cmd.Wait()
		in.cmd = nil
	}
}

// logCount counts the lines of the instance's log that contain s.
func (in *instance) logCount(s string) int {
	out := testkit.Must(os.ReadFile(in.log))
	return strings.Count(string(out), s)
}

// userHeader sets the header the instances take the principal from, as an
// authenticating proxy would.
type userHeader struct {
	user string
	rt   http.RoundTripper
}

func (u userHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-User", u.user)
	return u.rt.RoundTrip(r)
}

// client is one user's sessions, one per instance.
type client struct {
	user     string
	sessions []*mcp.ClientSession
}

func connect(t *testing.T, user string, fleet []*instance) *client {
	c := &client{user: user}
	for _, in := range fleet {
		mc := mcp.NewClient(&mcp.Implementation{Name: "fleet-" + user, Version: "1"}, &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
		hc := &http.Client{Transport: userHeader{user, http.DefaultTransport}, Timeout: 10 * time.Second}
		cs, err := mc.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: in.url(), HTTPClient: hc, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		c.sessions = append(c.sessions, cs)
	}
	return c
}

// errTransport marks a round no instance answered.
var errTransport = errors.New("no instance answered")

// call sends p to a random instance, and to others while an instance does
// not answer (killed, restarting): not answering is not a rejection. A
// single-use round whose first try was lost with the instance may have
// run there: its retry elsewhere is then refused as "replayed", which the
// client cannot tell from a payment that did not happen, or, if the
// instance died between Redis recording the use and confirming it, as
// "unavailable" until the state expires. That is the documented price of
// single use, counted apart as unanswered.
func (c *client) call(ctx context.Context, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	var last error
	for n, i := range rand.Perm(len(c.sessions)) {
		res, err := c.sessions[i].CallTool(ctx, p)
		if err == nil || rejected(err) {
			if n > 0 && (reason(err) == "replayed" || reason(err) == "unavailable") {
				return nil, fmt.Errorf("%w (retried after %v): %v", errTransport, last, err)
			}
			return res, err
		}
		last = err
	}
	return nil, fmt.Errorf("%w: %v", errTransport, last)
}

var confirm = mcp.InputResponseMap{"confirm": &mcp.ElicitResult{Action: "accept"}}

func retry(tool string, args map[string]any, state string) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: tool, Arguments: args, RequestState: state, InputResponses: confirm}
}

// rejected reports an error the server answered with, as opposed to one
// of the transport. The go-sdk client reports a refused requestState,
// which the server sends with HTTP 400, as a transport error (-32005)
// carrying the server's message, so the message decides.
func rejected(err error) bool {
	var je *jsonrpc.Error
	return errors.As(err, &je) && (je.Code != -32005 || strings.Contains(err.Error(), "invalid requestState"))
}

// reason is data.reason of a rejection, or "".
func reason(err error) string {
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		return ""
	}
	var d struct{ Reason string }
	testkit.Check(json.Unmarshal(je.Data, &d))
	return d.Reason
}
