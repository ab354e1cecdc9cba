package gateway

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
)

// An sseReader rewrites an upstream SSE stream event by event, as it
// arrives: an event whose data is a result carrying a requestState gets
// the state sealed, every other event passes byte for byte. It holds one
// event at a time, at most Gateway.MaxEventBytes.
//
// When the stream breaks (an error reading it, an event over the bound, a
// message that is not JSON-RPC, the idle timeout), the client gets a
// JSON-RPC error event for every call the upstream had not answered, and
// the stream ends: never a hang, never a half event.
type sseReader struct {
	src io.ReadCloser
	br  *bufio.Reader
	// sealer is the exchange the stream answers: it seals each event's
	// message, and says which calls still wait for an answer.
	sealer streamSealer
	out    []byte
	ev     []byte
	done   bool
	bom    bool // at the start of the stream, where a BOM may be
	// held is what the buffers ev and out took from the gateway's
	// response budget (MaxResponseBytesInFlight), given back on release.
	held int64
	g    *Gateway
}

// sseReaders are reused: a reader and its buffers per response would be
// most of what the gateway allocates.
var sseReaders = sync.Pool{New: func() any { return &sseReader{br: bufio.NewReaderSize(nil, 16<<10)} }}

// maxPooledEvent bounds the event buffer a pooled reader keeps.
const maxPooledEvent = 64 << 10

// sseBody is the stream the client gets, written by writeTo: a pooled
// sseReader, given back on the first Close.
type sseBody struct{ s *sseReader }

func (b *sseBody) Close() error {
	if b.s == nil {
		return nil
	}
	s := b.s
	b.s = nil
	return s.release()
}

func newSSEReader(src io.ReadCloser, g *Gateway, sealer streamSealer) *sseBody {
	s := sseReaders.Get().(*sseReader)
	s.src, s.sealer, s.g, s.done, s.bom = src, sealer, g, false, true
	s.br.Reset(src)
	s.out, s.ev = s.out[:0], s.ev[:0]
	return &sseBody{s}
}

// release closes the upstream body and gives the reader back to the pool.
func (s *sseReader) release() error {
	err := s.src.Close()
	s.src, s.sealer = nil, nil
	s.g.respInFlight.Add(-s.held)
	s.held, s.g = 0, nil
	s.br.Reset(nil)
	if cap(s.ev) > maxPooledEvent {
		s.ev = nil
	}
	if cap(s.out) > maxPooledEvent {
		s.out = nil
	}
	sseReaders.Put(s)
	return err
}

var errEventTooLarge = errors.New("an SSE event over the gateway's bound")

// charge takes from the response budget what the buffers hold beyond
// what they took already, plus extra bytes about to be allocated.
func (s *sseReader) charge(extra int) bool {
	n := int64(cap(s.ev)+cap(s.out)+extra) - s.held
	if n <= 0 {
		return true
	}
	if !take(&s.g.respInFlight, s.g.MaxResponseBytesInFlight, n) {
		return false
	}
	s.held += n
	return true
}

// appendEvent appends line to the event, its buffer grown only with
// bytes the response budget has.
func (s *sseReader) appendEvent(line []byte) bool {
	need := len(s.ev) + len(line)
	if need > cap(s.ev) {
		size := max(2*cap(s.ev), need)
		if m := int(s.g.MaxEventBytes); m > 0 {
			size = min(size, max(m, need)) // never past the event bound, which need is within
		}
		if !s.charge(size - cap(s.ev)) {
			return false
		}
		ev := make([]byte, len(s.ev), size)
		copy(ev, s.ev)
		s.ev = ev
	}
	s.ev = append(s.ev, line...)
	return true
}

// next reads one event and appends what the client gets to s.out.
func (s *sseReader) next() {
	s.ev = s.ev[:0]
	max := s.g.MaxEventBytes
	cont := false // line is the rest of a line longer than the buffer
	for {
		line, err := s.br.ReadSlice('\n')
		if s.bom && len(line) > 0 {
			// A client drops a BOM that starts the stream, and reads
			// the line after it; so does the gateway, for the client.
			s.bom = false
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
		}
		if len(line) > 0 {
			s.sealer.progress()
			if max > 0 && int64(len(s.ev)+len(line)) > max {
				s.fail(fmt.Errorf("%w (%d bytes)", errEventTooLarge, max))
				return
			}
			if !s.appendEvent(line) {
				s.fail(errSSEBudget)
				return
			}
		}
		if err == bufio.ErrBufferFull {
			cont = true
			continue
		}
		if err == io.EOF {
			// The stream ended. An event without its closing blank line
			// is discarded, as an SSE client would; but a lone CR ends
			// lines and events for a client.
			if loneCR(s.ev) {
				s.fail(errLoneCR)
				return
			}
			s.done = true
			return
		}
		if err != nil {
			s.fail(err)
			return
		}
		if !cont && blank(line) {
			if loneCR(s.ev) {
				s.fail(errLoneCR)
				return
			}
			s.process()
			return
		}
		cont = false
	}
}

// errLoneCR is a stream that ends a line with a CR alone, as SSE allows:
// the gateway reads lines ended by LF or CRLF only, so such a stream is
// refused rather than read otherwise than the client reads it. (No MCP
// server sends one; a JSON message cannot contain a raw CR.)
var errLoneCR = fmt.Errorf("%w: an SSE line ended by a CR alone", errUpstreamResponse)

// loneCR reports whether b has a CR not followed by an LF.
func loneCR(b []byte) bool {
	for {
		i := bytes.IndexByte(b, '\r')
		if i < 0 {
			return false
		}
		if i+1 == len(b) || b[i+1] != '\n' {
			return true
		}
		b = b[i+2:]
	}
}

// dataValue returns the value of a data line (its end of line cut): the
// field "data", with or without a colon (a line "data" is a data field
// with an empty value).
func dataValue(line []byte) ([]byte, bool) {
	line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
	v, ok := bytes.CutPrefix(line, []byte("data"))
	if !ok || len(v) > 0 && v[0] != ':' {
		return nil, false
	}
	if len(v) > 0 {
		v = bytes.TrimPrefix(v[1:], []byte(" "))
	}
	return v, true
}

// unknownField returns the first field of the event ev that is not one
// of SSE's four (data, event, id, retry) or a comment. A client ignores
// such a field, but one may read it otherwise than the gateway: a BOM
// encoded twice ("ï»¿data"), which eventsource-parser drops, would hide a
// data line, and its state, from the gateway. Such an event is refused.
func unknownField(ev []byte) ([]byte, bool) {
	for rest := ev; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 || line[0] == ':' {
			continue
		}
		name := line
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			name = line[:i]
		}
		switch string(name) {
		case "data", "event", "id", "retry":
			continue
		}
		return name, true
	}
	return nil, false
}

func blank(line []byte) bool {
	return len(line) == 1 || len(line) == 2 && line[0] == '\r'
}

// process appends the event in s.ev, rewritten if need be, to s.out.
func (s *sseReader) process() {
	ev := s.ev
	if f, ok := unknownField(ev); ok {
		s.fail(fmt.Errorf("%w: an SSE field %q the gateway does not read", errUpstreamResponse, short(string(f))))
		return
	}
	if passesUnread(ev, s.sealer.allAnswered()) {
		s.out = append(s.out, ev...)
		return
	}
	var data []byte
	ndata := 0
	for rest := ev; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i+1], rest[i+1:]
		} else {
			rest = nil
		}
		if v, ok := dataValue(line); ok {
			if ndata > 0 {
				data = append(data, '\n')
			}
			data = append(data, v...)
			ndata++
		}
	}
	if ndata == 0 || len(bytes.TrimSpace(data)) == 0 {
		s.out = append(s.out, ev...)
		return
	}
	msg, err := s.sealer.sealMessage(data, nil)
	if err != nil {
		s.fail(err)
		return
	}
	if msg == nil {
		s.out = append(s.out, ev...)
		return
	}
	// The same event with its data replaced: every other field (id,
	// event, retry, comments) is kept, in order.
	for rest := ev; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i+1], rest[i+1:]
		} else {
			rest = nil
		}
		if _, ok := dataValue(line); ok || blank(line) {
			continue
		}
		s.out = append(s.out, line...)
	}
	s.out = append(s.out, "data: "...)
	s.out = append(s.out, msg...)
	s.out = append(s.out, "\n\n"...)
}

// errSSEBudget is an event the gateway had no memory left to hold.
var errSSEBudget = fmt.Errorf("%w (an SSE event)", errResponseBudget)

// fail ends the stream: an error event for every call not answered.
func (s *sseReader) fail(err error) {
	s.done = true
	s.src.Close()
	msg := "upstream response failed"
	switch {
	case errors.Is(err, errUpstreamResponse):
		s.g.Stats.Malformed.Add(1)
		msg = errUpstreamResponse.Error()
	case errors.Is(err, errEventTooLarge):
		msg = "upstream SSE event too large"
	case errors.Is(err, errResponseBudget):
		// Not "try again": the upstream may have acted on the call.
		msg = "upstream response dropped: " + errResponseBudget.Error()
	case s.sealer.timedOut():
		msg = "upstream timed out"
	}
	s.g.Stats.UpstreamErrors.Add(1)
	s.g.logger().Warn("gateway: upstream stream ended", "err", err)
	for _, id := range s.sealer.unanswered() {
		s.out = append(s.out, "event: message\ndata: "...)
		s.out = append(s.out, errorMessage(id, rpcError{Code: codeInternalError, Message: msg})...)
		s.out = append(s.out, "\n\n"...)
	}
}

// writeTo writes the stream to w event by event, each in one Write,
// until it ends; it fails only if w does.
func (b *sseBody) writeTo(w io.Writer) error {
	s := b.s
	for {
		s.out = s.out[:0]
		if s.done {
			return nil
		}
		s.next()
		// The event as rewritten is counted, never refused: its call is
		// answered in it. The next event finds the budget the lower.
		if n := int64(cap(s.ev)+cap(s.out)) - s.held; n > 0 {
			s.g.respInFlight.Add(n)
			s.held += n
		}
		if len(s.out) > 0 {
			if _, err := w.Write(s.out); err != nil {
				return err
			}
		}
	}
}
