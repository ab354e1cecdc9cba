package gateway

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// A round is one 2026-07-28 request the bridge sends through the
// gateway's own walk, in process (ServeHTTP, as for any 2026-07-28
// client: its state opened, its answer's sealed, its single use
// checked), and the answer read back: notifications as they stream, then
// the response to the request.

// meta keys of 2026-07-28 (SEP-2575).
const (
	metaVersion = "io.modelcontextprotocol/protocolVersion"
	metaCaps    = "io.modelcontextprotocol/clientCapabilities"
	metaInfo    = "io.modelcontextprotocol/clientInfo"
	metaServer  = "io.modelcontextprotocol/serverInfo"
	metaLog     = "io.modelcontextprotocol/logLevel"
)

// bridgeLogLevel is the log level the bridge asks the upstream for: a
// 2025 client's logging/setLevel is accepted but not kept (no store),
// and a 2025 server sends log messages without one.
const bridgeLogLevel = "info"

// upstreamParams adds to params what a 2026-07-28 request carries in its
// _meta: the version, and the session's capabilities and clientInfo.
func upstreamParams(params jsontext.Value, s *session) (map[string]jsontext.Value, error) {
	p := map[string]jsontext.Value{}
	if len(params) > 0 && string(params) != "null" {
		if params.Kind() != '{' || json.Unmarshal(params, &p) != nil {
			return nil, errors.New("params is not an object")
		}
	}
	meta := map[string]jsontext.Value{}
	if v, ok := p["_meta"]; ok {
		if v.Kind() != '{' || json.Unmarshal(v, &meta) != nil {
			return nil, errors.New("params._meta is not an object")
		}
	}
	meta[metaVersion] = jsontext.Value(`"` + version2026 + `"`)
	if _, ok := meta[metaLog]; !ok {
		meta[metaLog] = jsontext.Value(`"` + bridgeLogLevel + `"`)
	}
	meta[metaCaps] = s.Caps
	if len(s.Info) > 0 {
		meta[metaInfo] = s.Info
	}
	m, err := json.Marshal(meta, json.Deterministic(true))
	if err != nil {
		return nil, err
	}
	p["_meta"] = m
	return p, nil
}

// errRoundCut is a round whose answer ended before its response.
var errRoundCut = errors.New("the upstream's answer ended before its response")

// round sends method with params through the walk, as r's principal,
// and returns the response to it; note gets each notification on the
// way. A refusal of the walk (a state that did not open, a bound) comes
// back as the JSON-RPC error it answered.
func (g *Gateway) round(ctx context.Context, r *http.Request, method, name string, params map[string]jsontext.Value, note func([]byte) error) (legacyMessage, error) {
	var id [12]byte
	rand.Read(id[:])
	innerID := jsontext.Value(fmt.Sprintf(`"sg-%x"`, id))
	body, err := json.Marshal(struct {
		JSONRPC string                    `json:"jsonrpc"`
		ID      jsontext.Value            `json:"id"`
		Method  string                    `json:"method"`
		Params  map[string]jsontext.Value `json:"params"`
	}{"2.0", innerID, method, params}, json.Deterministic(true))
	if err != nil {
		return legacyMessage{}, err
	}
	in := r.Clone(ctx)
	in.Method = http.MethodPost
	in.Body = io.NopCloser(bytes.NewReader(body))
	in.ContentLength = int64(len(body))
	in.GetBody = nil
	h := in.Header
	for _, k := range []string{headerSession, "Last-Event-Id", "Content-Length", "Content-Encoding"} {
		delete(h, k)
	}
	h.Set(headerVersion, version2026)
	h.Set(headerMethod, method)
	if name != "" {
		h.Set(headerName, name)
	} else {
		delete(h, headerName)
	}
	h["Content-Type"] = jsonType
	h.Set("Accept", "application/json, text/event-stream")

	pw := newPipeWriter()
	done := make(chan struct{})
	var panicked *roundPanic
	go func() {
		defer close(done)
		defer pw.finish()
		defer func() {
			// The walk aborts a stream it cannot finish as a server
			// would have it (http.ErrAbortHandler): here that is a cut
			// answer. Any other panic is the call's: raised again on
			// its goroutine, whose handler (net/http) or parked call
			// recovers it, as net/http recovers the walk's for a
			// 2026-07-28 client. Raised here, nothing would: the
			// process would die.
			if p := recover(); p != nil && p != http.ErrAbortHandler {
				panicked = &roundPanic{p, debug.Stack()}
			}
		}()
		g.ServeHTTP(pw, in)
	}()
	defer func() {
		pw.pr.CloseWithError(errRoundCut)
		<-done
		if panicked != nil {
			panic(panicked)
		}
	}()
	select {
	case <-pw.wrote:
	case <-ctx.Done():
		return legacyMessage{}, context.Cause(ctx)
	}
	ct, _, _ := mime.ParseMediaType(pw.h.Get("Content-Type"))
	if ct != "text/event-stream" {
		b, err := io.ReadAll(io.LimitReader(pw.pr, max(g.MaxResponseBytes, 1<<20)+1))
		if err != nil {
			return legacyMessage{}, err
		}
		var m legacyMessage
		if json.Unmarshal(b, &m) != nil || !m.isResponse() {
			return legacyMessage{}, fmt.Errorf("HTTP %d: %s", pw.status, short(string(b)))
		}
		return m, nil
	}
	sc := newEventReader(pw.pr, max(g.MaxEventBytes, 1<<20))
	for {
		data, err := sc.next()
		if err != nil {
			if ctx.Err() != nil {
				return legacyMessage{}, context.Cause(ctx)
			}
			return legacyMessage{}, errRoundCut
		}
		var m legacyMessage
		if json.Unmarshal(data, &m) != nil {
			return legacyMessage{}, errors.New("the upstream sent an event that is not a JSON-RPC message")
		}
		switch {
		case m.isResponse() && bytes.Equal(m.ID, innerID):
			return m, nil
		case len(m.ID) == 0 && m.Method != "":
			if err := note(data); err != nil {
				return legacyMessage{}, err
			}
		default:
			// A 2026-07-28 server sends no requests of its own, and no
			// response but the one to this request.
			return legacyMessage{}, errors.New("the upstream sent a message that is neither a notification nor the response")
		}
	}
}

// A roundPanic is a panic of a round's walk, with its stack, raised
// again on the goroutine of the call.
type roundPanic struct {
	v     any
	stack []byte
}

func (p *roundPanic) String() string {
	return fmt.Sprintf("%v (in a bridged call's round)\n%s", p.v, p.stack)
}

// pipeWriter is the ResponseWriter a round's walk writes into: the
// bridge reads its header once written, and its body as it streams.
type pipeWriter struct {
	h      http.Header
	status int
	wrote  chan struct{}
	once   sync.Once
	pr     *io.PipeReader
	pw     *io.PipeWriter
}

func newPipeWriter() *pipeWriter {
	pr, pw := io.Pipe()
	return &pipeWriter{h: http.Header{}, wrote: make(chan struct{}), pr: pr, pw: pw}
}

func (p *pipeWriter) Header() http.Header { return p.h }

func (p *pipeWriter) WriteHeader(status int) {
	if status >= 100 && status < 200 {
		return
	}
	p.once.Do(func() { p.status = status; close(p.wrote) })
}

func (p *pipeWriter) Write(b []byte) (int, error) {
	p.WriteHeader(http.StatusOK)
	return p.pw.Write(b)
}

// Flush: every Write is already in the pipe.
func (p *pipeWriter) Flush() {}

// SetReadDeadline: the body is in memory; nothing to bound.
func (p *pipeWriter) SetReadDeadline(time.Time) error { return nil }

func (p *pipeWriter) finish() {
	p.WriteHeader(http.StatusOK)
	p.pw.Close()
}

// eventReader reads the data of SSE events the walk wrote (it writes
// only events it read and rewrote: data lines, LF line ends).
type eventReader struct {
	r   *bufio.Reader
	max int64
}

func newEventReader(r io.Reader, max int64) *eventReader {
	return &eventReader{r: bufio.NewReader(r), max: max}
}

// next returns the data of the next event that has any.
func (e *eventReader) next() ([]byte, error) {
	var data []byte
	for {
		line, err := e.r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A long line: read it whole, within the bound.
			long := append([]byte(nil), line...)
			for err == bufio.ErrBufferFull && int64(len(long)) <= e.max {
				line, err = e.r.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil {
			return nil, err
		}
		if int64(len(data)+len(line)) > e.max {
			return nil, errors.New("event too large")
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			if data != nil {
				return data, nil
			}
		case bytes.HasPrefix(line, []byte("data:")):
			v := bytes.TrimPrefix(line[5:], []byte(" "))
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, v...)
		}
	}
}

// discovered is what initialize tells a client of the upstream.
type discovered struct {
	Capabilities jsontext.Value
	ServerInfo   jsontext.Value
	Instructions string
}

// discover asks the upstream for its capabilities and identity, the
// 2026-07-28 way (server/discover), as the session's client.
func (g *Gateway) discover(r *http.Request, s *session) (discovered, error) {
	params, err := upstreamParams(nil, s)
	if err != nil {
		return discovered{}, err
	}
	m, err := g.round(r.Context(), r, "server/discover", "", params, func([]byte) error { return nil })
	if err != nil {
		return discovered{}, err
	}
	if len(m.Error) > 0 {
		return discovered{}, errors.New(short(string(m.Error)))
	}
	var res struct {
		Capabilities jsontext.Value            `json:"capabilities"`
		ServerInfo   jsontext.Value            `json:"serverInfo,omitzero"`
		Instructions string                    `json:"instructions,omitzero"`
		Meta         map[string]jsontext.Value `json:"_meta,omitzero"`
	}
	if err := json.Unmarshal(m.Result, &res, json.RejectUnknownMembers(false)); err != nil || res.Capabilities.Kind() != '{' {
		return discovered{}, errors.New("server/discover's result has no capabilities object")
	}
	d := discovered{Capabilities: res.Capabilities, ServerInfo: res.ServerInfo, Instructions: res.Instructions}
	if len(d.ServerInfo) == 0 {
		d.ServerInfo = res.Meta[metaServer]
	}
	if d.ServerInfo.Kind() != '{' {
		d.ServerInfo = jsontext.Value(`{"name":"sealgate","version":"0"}`)
	}
	return d, nil
}
