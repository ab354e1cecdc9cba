// Package wire is statescan's one reader and writer of MCP 2026-07-28
// Streamable HTTP: it builds each request (body, _meta, the headers a
// stateless server expects) and turns each answer, a JSON body or an SSE
// stream, into a parsed Reply or an error. Nothing else in scan touches
// raw bodies. It knows the protocol and nothing of any token format.
package wire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
)

// ProtocolVersion is the MCP revision the client speaks.
const ProtocolVersion = "2026-07-28"

// MaxBody bounds an answer's body: a longer one is an error.
const MaxBody = 8 << 20

// ErrTransport wraps every failure to get an answer at all: no
// connection, a timeout, a redirect, an unreadable body.
var ErrTransport = errors.New("no answer")

// A Request is one call of a method that may answer input_required.
type Request struct {
	Method string // tools/call, prompts/get, resources/read
	Name   string // the tool or prompt name, or the resource URI
	// Arguments is the JSON object of arguments (tools/call, prompts/get);
	// nil sends none.
	Arguments json.RawMessage
	// State is sent as params.requestState when HasState.
	State    string
	HasState bool
	// Responses is sent as params.inputResponses when not nil.
	Responses map[string]json.RawMessage
	// Header is added to the request (credentials); Content-Type,
	// Accept and the protocol headers are the client's own.
	Header http.Header
}

// Body is the JSON-RPC request r makes with the id.
func (r *Request) Body(id int) ([]byte, error) {
	params := map[string]any{
		"_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion": ProtocolVersion,
			"io.modelcontextprotocol/clientCapabilities": map[string]any{
				"elicitation": map[string]any{"form": map[string]any{}},
				"sampling":    map[string]any{},
				"roots":       map[string]any{},
			},
			"io.modelcontextprotocol/clientInfo": map[string]any{"name": "statescan", "version": "1"},
		},
	}
	if r.Method == "resources/read" {
		params["uri"] = r.Name
	} else {
		params["name"] = r.Name
		if r.Arguments != nil {
			params["arguments"] = r.Arguments
		}
	}
	if r.Responses != nil {
		params["inputResponses"] = r.Responses
	}
	if r.HasState {
		params["requestState"] = r.State
	}
	return json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": r.Method, "params": params})
}

// A Reply is what came back for one request.
type Reply struct {
	Status int
	// Error is the JSON-RPC error, if the answer was one.
	Error *RPCError
	// Result is the JSON-RPC result, if the answer was one.
	Result *Result
	// Text is a short description of an answer that is neither (an HTTP
	// error page, a stream without our response).
	Text string
}

// An RPCError is a JSON-RPC error object.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// A Result is the part of a result the scanner reads.
type Result struct {
	ResultType    string                     `json:"resultType"`
	IsError       bool                       `json:"isError"`
	InputRequests map[string]json.RawMessage `json:"inputRequests"`
	RequestState  *string                    `json:"requestState"`
	Content       json.RawMessage            `json:"content"`
	Raw           json.RawMessage            `json:"-"`
}

// InputRequired reports whether the result asks for input.
func (r *Result) InputRequired() bool {
	return r.ResultType == "input_required" || (r.ResultType == "" && (r.InputRequests != nil || r.RequestState != nil))
}

// A Client sends requests to one URL.
type Client struct {
	URL  string
	HTTP *http.Client // CheckRedirect is replaced: no redirect is followed
	next atomic.Int64
}

// NewClient returns a client of u that never follows a redirect, so that
// nothing is sent anywhere but u.
func NewClient(u string, hc *http.Client) (*Client, error) {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return nil, fmt.Errorf("target URL %q: want http(s)://host/path", u)
	}
	c := *http.DefaultClient
	if hc != nil {
		c = *hc
	}
	c.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		return fmt.Errorf("redirect to %s refused: statescan contacts only the target URL", req.URL.Redacted())
	}
	return &Client{URL: u, HTTP: &c}, nil
}

// Do sends r and reads its answer. It is safe to call from several
// goroutines at once.
func (c *Client) Do(ctx context.Context, r *Request) (*Reply, error) {
	id := int(c.next.Add(1))
	body, err := r.Body(id)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", ProtocolVersion)
	req.Header.Set("Mcp-Method", r.Method)
	req.Header.Set("Mcp-Name", r.Name)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTransport, err)
	}
	defer resp.Body.Close()
	rep, err := read(resp, id)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTransport, err)
	}
	return rep, nil
}

// read reads an answer: a JSON body, or an SSE stream up to the response
// with our id.
func read(resp *http.Response, id int) (*Reply, error) {
	rep := &Reply{Status: resp.StatusCode}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	lr := io.LimitReader(resp.Body, MaxBody+1)
	switch ct {
	case "text/event-stream":
		sc := bufio.NewScanner(lr)
		sc.Buffer(make([]byte, 64<<10), MaxBody)
		var data []string
		flush := func() bool {
			if len(data) == 0 {
				return false
			}
			msg := []byte(strings.Join(data, "\n"))
			data = data[:0]
			return parseMessage(msg, id, rep)
		}
		for sc.Scan() {
			line := sc.Text()
			if line == "" {
				if flush() {
					return rep, nil
				}
				continue
			}
			if v, ok := strings.CutPrefix(line, "data:"); ok {
				data = append(data, strings.TrimPrefix(v, " "))
			}
		}
		if err := sc.Err(); err != nil {
			return nil, err
		}
		if flush() {
			return rep, nil
		}
		rep.Text = fmt.Sprintf("HTTP %d: an event stream without the response", resp.StatusCode)
		return rep, nil
	default:
		b, err := io.ReadAll(lr)
		if err != nil {
			return nil, err
		}
		if len(b) > MaxBody {
			return nil, fmt.Errorf("answer over %d bytes", MaxBody)
		}
		if ct == "application/json" && parseMessage(b, id, rep) {
			return rep, nil
		}
		rep.Text = describe(resp.StatusCode, ct, b)
		return rep, nil
	}
}

// parseMessage fills rep from msg if msg is the response to id.
func parseMessage(msg []byte, id int, rep *Reply) bool {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *RPCError       `json:"error"`
	}
	if json.Unmarshal(msg, &m) != nil {
		return false
	}
	if m.Error != nil {
		// An error may come with a null id (a parse error).
		rep.Error = m.Error
		return true
	}
	if string(m.ID) != fmt.Sprint(id) || m.Result == nil {
		return false // a notification, or another request's answer
	}
	var r Result
	if json.Unmarshal(m.Result, &r) != nil {
		return false
	}
	r.Raw = m.Result
	rep.Result = &r
	return true
}

// describe names an answer that is not a JSON-RPC message: its status,
// its content type and the start of its body, each only when there is
// one ("HTTP 401, an empty body").
func describe(status int, ct string, b []byte) string {
	d := fmt.Sprintf("HTTP %d", status)
	if ct != "" {
		d += " " + ct
	}
	if body := short(string(b), 120); body != "" {
		return d + ": " + body
	}
	return d + ", an empty body"
}

func short(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
