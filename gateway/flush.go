package gateway

import "net/http"

// A flushWriter is the client's ResponseWriter as the proxy writes to it.
// For a stream, it flushes the headers when they are written and the
// body after each write: each is whole events (an sseBody's Read returns
// one event at a time).
type flushWriter struct {
	http.ResponseWriter
	stream bool
}

func (f *flushWriter) WriteHeader(code int) {
	f.ResponseWriter.WriteHeader(code)
	if f.stream {
		f.Flush()
	}
}

func (f *flushWriter) Write(p []byte) (int, error) {
	n, err := f.ResponseWriter.Write(p)
	if f.stream && err == nil {
		f.Flush()
	}
	return n, err
}

func (f *flushWriter) Flush() {
	if fl, ok := f.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
		return
	}
	http.NewResponseController(f.ResponseWriter).Flush()
}

// Unwrap gives http.ResponseController the client's ResponseWriter.
func (f *flushWriter) Unwrap() http.ResponseWriter { return f.ResponseWriter }
