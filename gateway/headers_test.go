package gateway

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/stateseal/stateseal/internal/testkit"
)

// utf7State is a JSON result that is valid UTF-8 and names no
// requestState, but that a client decoding it as UTF-7 reads as
// `"x":"","requestState":"<plain>"`: +ACIALAAi- is UTF-7 for `","`,
// +ACIAOgAi- for `":"`.
func utf7State(id any) string {
	return `{"jsonrpc":"2.0","id":` + toJSON(id) + `,"result":{"resultType":"input_required","inputRequests":{},"x":"+ACIALAAi-requestState+ACIAOgAi-` + plain + `"}}`
}

func toJSON(v any) string { return string(testkit.Must(jsonMarshal(v))) }

// charsetAttacks are Content-Types that Go's mime.ParseMediaType and
// another reader (Python's email package, which httpx and requests use)
// may read with different charsets, or that name a charset other than
// UTF-8 in a spelling some reader takes: each is refused.
var charsetAttacks = []string{
	`%s; charset=utf-7; charset*=utf-8''utf-8`,
	`%s; charset*=utf-8''utf-8; charset=utf-7`,
	`%s; charset*=utf-8''utf-7`,
	`%s; charset*0=utf-7`,
	`%s; charset=utf-8; charset=utf-7`,
	`%s; charset=utf-8; CHARSET=utf-7`,
	`%s; charset="utf-7"`,
	`%s; charset="utf-8"`, // another spelling of the same: refused all the same
	`%s; charset=utf8`,
	`%s; charset=unicode_escape`,
	`%s; charset=utf-8; x=y`,
	`%s; x="a;charset=utf-7"`,
	`%s;charset=utf-8;`,
}

// TestResponseCharset: an upstream that names a charset a client may
// read its bytes in, other than UTF-8, is refused in JSON and in SSE,
// and the client never gets the bytes that spell a plaintext state in
// it; the plain spellings pass, and the client is told the media type
// the gateway read, with no parameter.
func TestResponseCharset(t *testing.T) {
	var ctype string
	var sse bool
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request, msg map[string]any) {
		w.Header()["Content-Type"] = []string{ctype}
		if sse {
			io.WriteString(w, "event: message\ndata: "+utf7State(msg["id"])+"\n\n")
			return
		}
		io.WriteString(w, utf7State(msg["id"]))
	}, nil)
	post := func() (*http.Response, []byte) {
		req := testkit.Must(http.NewRequest("POST", f.url, strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"book"}}`)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp := testkit.Must(http.DefaultClient.Do(req))
		defer resp.Body.Close()
		return resp, testkit.Must(io.ReadAll(resp.Body))
	}
	provePython(t, strings.ReplaceAll(charsetAttacks[0], "%s", "application/json"), utf7State(7))
	for _, mt := range []string{"application/json", "text/event-stream"} {
		sse = mt == "text/event-stream"
		for _, a := range charsetAttacks {
			ctype = strings.ReplaceAll(a, "%s", mt)
			resp, b := post()
			if resp.StatusCode != http.StatusBadGateway || !bytes.Contains(b, []byte(`"code":-32603`)) || bytes.Contains(b, []byte(plain)) {
				t.Errorf("Content-Type %q: HTTP %d %q: want a 502 JSON-RPC error", ctype, resp.StatusCode, b)
			}
		}
		for _, ok := range []string{mt, strings.ToUpper(mt), mt + "; charset=utf-8", mt + " ;\tCharset=UTF-8 "} {
			ctype = ok
			resp, b := post()
			if resp.StatusCode != http.StatusOK || len(resp.Header["Content-Type"]) != 1 || resp.Header.Get("Content-Type") != mt {
				t.Errorf("Content-Type %q: HTTP %d, client told %q: %q", ctype, resp.StatusCode, resp.Header["Content-Type"], b)
			}
		}
	}
}

// provePython checks the attack's premise with a real Python reader
// where there is one: Python's email package reads the Content-Type's
// charset as UTF-7, and the body decoded with it names a plaintext
// requestState.
func provePython(t *testing.T, ctype, body string) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Log("no python3: the attack's premise not shown")
		return
	}
	prog := `import sys, json
from email.message import Message
m = Message(); m["Content-Type"] = sys.argv[1]
cs = m.get_content_charset()
print(cs, json.loads(sys.argv[2].encode().decode(cs))["result"].get("requestState"))`
	out, err := exec.Command(py, "-c", prog, ctype, body).CombinedOutput()
	if err != nil {
		t.Fatalf("python3: %v: %s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "utf-7 "+plain {
		t.Fatalf("python3 reads %q as %q, want utf-7 and the plaintext", ctype, got)
	}
}

// TestResponseHeadersOwned: the headers that say how to read a body are
// the gateway's: its own Content-Type and Content-Length, no digest or
// validator of the upstream's body, no coding, no second spelling of an
// owned name; the headers that do not describe the body pass.
func TestResponseHeadersOwned(t *testing.T) {
	var sse bool
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request, msg map[string]any) {
		h := w.Header()
		h["Content-Type"] = []string{"application/json; charset=utf-8"}
		if sse {
			h["Content-Type"] = []string{"text/event-stream; charset=UTF-8"}
		}
		for k, v := range map[string]string{"Etag": `"abc"`, "Content-Digest": "sha-256=:x:", "Repr-Digest": "sha-256=:x:", "Digest": "SHA-256=x",
			"Content-Md5": "x", "Content-Transfer-Encoding": "quoted-printable", "Content_type": "text/plain; charset=utf-7", "Content-Encoding": "identity",
			"Accept-Ranges": "bytes", "Content-Foo": "bar", "X-Request-Id": "r1", "Content-Language": "en", "Cache-Control": "no-store"} {
			h[k] = []string{v}
		}
		if sse {
			io.WriteString(w, "event: message\ndata: "+toJSON(result(msg, stateResult(msg)))+"\n\n")
			return
		}
		writeJSONValue(w, result(msg, stateResult(msg)))
	}, nil)
	for _, sse = range []bool{false, true} {
		req := testkit.Must(http.NewRequest("POST", f.url, strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"book"}}`)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp := testkit.Must(http.DefaultClient.Do(req))
		b := testkit.Must(io.ReadAll(resp.Body))
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"requestState":"`)) || bytes.Contains(b, []byte("plain:")) {
			t.Fatalf("sse %v: HTTP %d %q", sse, resp.StatusCode, b)
		}
		want := map[string]bool{"X-Request-Id": true, "Content-Language": true, "Cache-Control": true, "Content-Type": true, "Date": true}
		if !sse {
			want["Content-Length"] = true
		}
		for k := range resp.Header {
			if !want[k] {
				t.Errorf("sse %v: the client got the upstream's %s: %q", sse, k, resp.Header[k])
			}
		}
		if ct := resp.Header["Content-Type"]; len(ct) != 1 || ct[0] != map[bool]string{false: "application/json", true: "text/event-stream"}[sse] {
			t.Errorf("sse %v: Content-Type %q", sse, ct)
		}
		if !sse && resp.ContentLength != int64(len(b)) {
			t.Errorf("Content-Length %d for %d bytes", resp.ContentLength, len(b))
		}
	}
}

// TestResponseOtherTypes: a body of another media type keeps its media
// type, and gets charset=utf-8 in place of the upstream's parameters
// (which readers parse differently: Python's email reader finds
// charset=cp037 in a="\\"; b=";charset=cp037;"); one naming a charset
// other than UTF-8 or ASCII, or a type some client reads as SSE, is
// refused; a partial body is refused.
func TestResponseOtherTypes(t *testing.T) {
	var ctype string
	var partial bool
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request, msg map[string]any) {
		w.Header()["Content-Type"] = []string{ctype}
		if partial {
			w.Header().Set("Content-Range", "bytes 0-1/10")
			w.WriteHeader(http.StatusPartialContent)
		}
		io.WriteString(w, "hello")
	}, nil)
	get := func() (int, string) {
		resp := testkit.Must(http.Get(f.url))
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Content-Type")
	}
	for in, want := range map[string]string{
		"text/plain":                              "text/plain; charset=utf-8",
		"TEXT/HTML; Charset=UTF-8":                "text/html; charset=utf-8",
		`text/plain; charset="us-ascii"`:          "text/plain; charset=utf-8",
		`multipart/mixed; boundary="a b"`:         "multipart/mixed; charset=utf-8",
		`text/plain; a="\\"; b=";charset=cp037;"`: "text/plain; charset=utf-8",
		"text/plain; charset=utf-7":               "",
		"text/plain; charset=\"us-a\u017fcii\"":   "",
		"text/event-streamx":                      "",
		"text/event-stream+x":                     "",
		"text/plain; charset=iso-8859-1":          "",
		"text/plain; charset*=utf-8''utf8":        "",
		"text/plain; a=1; A=2":                    "",
		"text/plain; a":                           "",
		"text/plain/x":                            "",
		"application/problem+json":                "",
	} {
		ctype = in
		status, got := get()
		if want == "" && status != http.StatusBadGateway || want != "" && (status != 200 || got != want) {
			t.Errorf("Content-Type %q: HTTP %d, client told %q; want %q", in, status, got, want)
		}
	}
	ctype, partial = "text/plain", true
	if status, _ := get(); status != http.StatusBadGateway {
		t.Errorf("a partial body: HTTP %d", status)
	}
}

// cp037 is the EBCDIC code page 037 encoding of the ASCII in s (letters,
// digits and the few signs a JSON-RPC result needs).
func cp037(s string) []byte {
	const lower, upper, digits = "\x81\x82\x83\x84\x85\x86\x87\x88\x89\x91\x92\x93\x94\x95\x96\x97\x98\x99\xa2\xa3\xa4\xa5\xa6\xa7\xa8\xa9",
		"\xc1\xc2\xc3\xc4\xc5\xc6\xc7\xc8\xc9\xd1\xd2\xd3\xd4\xd5\xd6\xd7\xd8\xd9\xe2\xe3\xe4\xe5\xe6\xe7\xe8\xe9",
		"\xf0\xf1\xf2\xf3\xf4\xf5\xf6\xf7\xf8\xf9"
	signs := map[rune]byte{'{': 0xc0, '}': 0xd0, '"': 0x7f, ':': 0x7a, ',': 0x6b, '-': 0x60, '.': 0x4b, ' ': 0x40, '_': 0x6d}
	var b []byte
	for _, r := range s {
		switch {
		case 'a' <= r && r <= 'z':
			b = append(b, lower[r-'a'])
		case 'A' <= r && r <= 'Z':
			b = append(b, upper[r-'A'])
		case '0' <= r && r <= '9':
			b = append(b, digits[r-'0'])
		default:
			b = append(b, signs[r])
		}
	}
	return b
}

// TestResponseOtherBodies: a body of another media type reaches the
// client only as UTF-8 text without a requestState in any spelling: an
// EBCDIC body (which requests and aiohttp, guessing a charset, decode to
// a plaintext state), a bare YAML-style name, control characters are
// refused; plain text passes, typed text/plain; charset=utf-8 even when
// the upstream sent no type.
func TestResponseOtherBodies(t *testing.T) {
	var body []byte
	var ctype string
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request, msg map[string]any) {
		if ctype != "" {
			w.Header().Set("Content-Type", ctype)
		} else {
			w.Header()["Content-Type"] = nil
		}
		w.Write(body)
	}, nil)
	for _, tc := range []struct {
		ctype string
		body  []byte
		ok    bool
	}{
		{"text/plain", cp037(`{"jsonrpc":"2.0","id":1,"result":{"requestState":"` + plain + `"}}`), false},
		{"application/octet-stream", cp037(`{"jsonrpc":"2.0","id":1,"result":{"requestState":"` + plain + `"}}`), false},
		{"", cp037(`{"jsonrpc":"2.0","id":1,"result":{"requestState":"` + plain + `"}}`), false},
		{"text/yaml", []byte("result:\n  request_state: " + plain + "\n"), false},
		{"application/yaml", []byte("result:\n  \"request\\x53tate\": " + plain + "\n"), false},
		{"application/yaml", []byte("result:\n  \"request\\U00000053tate\": " + plain + "\n"), false},
		{"text/plain", []byte("a path C:\\\\Temp, and \\t a tab"), true},
		{"text/plain", []byte("hello\x1bworld"), false},
		{"text/plain", []byte("héllo, world\n"), true},
		{"", []byte("hello"), true},
	} {
		ctype, body = tc.ctype, tc.body
		resp := testkit.Must(http.Get(f.url))
		b := testkit.Must(io.ReadAll(resp.Body))
		resp.Body.Close()
		switch {
		case tc.ok && (resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" && resp.Header.Get("Content-Type") != tc.ctype+"; charset=utf-8"):
			t.Errorf("%q %q: HTTP %d, %q", tc.ctype, tc.body, resp.StatusCode, resp.Header.Get("Content-Type"))
		case !tc.ok && (resp.StatusCode != http.StatusBadGateway || bytes.Contains(b, tc.body)):
			t.Errorf("%q %q: HTTP %d %q, want refused", tc.ctype, tc.body, resp.StatusCode, b)
		}
	}
}

// TestUpstreamHeadersBounded: an upstream's response headers are bounded
// (the client would get them all, outside the response budget).
func TestUpstreamHeadersBounded(t *testing.T) {
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request, msg map[string]any) {
		for i := range 20 {
			w.Header().Set(fmt.Sprintf("X-Pad-%d", i), strings.Repeat("a", 8000))
		}
		writeJSONValue(w, result(msg, map[string]any{}))
	}, nil)
	status, _ := f.post(rpcCall(1, "tools/list", "", nil, ""), nil)
	if status != http.StatusBadGateway {
		t.Fatalf("160 KB of response headers: HTTP %d", status)
	}
}
