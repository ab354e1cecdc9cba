package gateway

import (
	"net/http"
	"strconv"
)

// write is the walk's last step: it gives the client the answer as the
// gateway read and sealed it, under headers that say how to read the body
// and are the gateway's own (headers.go): a body whole, with its length,
// or a stream, event by event as its reader reads and seals them.
func (ex *exchange) write(w http.ResponseWriter, resp *http.Response, a *answer) {
	ex.out.ResponseWriter = w // the header timer is stopped when the exchange ends (flush.go)
	dst := ex.out.Header()
	copyResponseHeaders(dst, resp.Header)
	if a.ctype != "" {
		dst["Content-Type"] = ctypeHeader(a.ctype)
	}
	if a.stream == nil {
		if a.body != nil {
			dst["Content-Length"] = []string{strconv.Itoa(len(a.body))}
		}
		ex.out.WriteHeader(resp.StatusCode)
		ex.out.Write(a.body)
		return
	}
	ex.out.stream = true
	ex.out.WriteHeader(resp.StatusCode)
	if err := a.stream.writeTo(&ex.out); err != nil {
		// The client has part of the stream: ending it cleanly would
		// tell it the stream is whole. A server recovers this panic and
		// cuts the connection (as ReverseProxy does).
		if ex.r.Context().Value(http.ServerContextKey) != nil {
			panic(http.ErrAbortHandler)
		}
	}
}

func writeJSON(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

// ctypeHeader is the header value for the Content-Type the gateway
// writes, shared for the usual two.
func ctypeHeader(ct string) []string {
	switch ct {
	case "application/json":
		return jsonType
	case "text/event-stream":
		return sseType
	}
	return []string{ct}
}
