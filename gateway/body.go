package gateway

import (
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// readBody reads a request's body, bounded in size, in time (with
// BodyTimeout) and, with the other requests' bodies, in memory
// (MaxRequestBytesInFlight). held is the bytes it took from the
// in-flight budget, to give back when the exchange ends, even on error.
func (g *Gateway) readBody(w http.ResponseWriter, r *http.Request) (body []byte, held int64, ferr *framingError) {
	if g.MaxRequestBytes > 0 && r.ContentLength > g.MaxRequestBytes {
		return nil, 0, refuseFraming(http.StatusRequestEntityTooLarge, "request body exceeds %d bytes", g.MaxRequestBytes)
	}
	if g.BodyTimeout > 0 {
		rc := http.NewResponseController(w)
		if rc.SetReadDeadline(time.Now().Add(g.BodyTimeout)) == nil {
			defer rc.SetReadDeadline(time.Time{})
		}
	}
	body, held, err := readBudgeted(r.Body, r.ContentLength, g.MaxRequestBytes, g.MaxRequestBytesInFlight, &g.inFlight)
	r.Body.Close()
	switch {
	case err == nil && len(r.Trailer) > 0:
		// Trailers not declared in a Trailer header, read with the body.
		return nil, held, refuseFraming(http.StatusBadRequest, "a request with trailers: the gateway does not take request trailers")
	case err == nil:
		return body, held, nil
	case errors.Is(err, errTooLarge):
		return nil, held, refuseFraming(http.StatusRequestEntityTooLarge, "request body exceeds %d bytes", g.MaxRequestBytes)
	case errors.Is(err, errBudget):
		return nil, held, refuseFraming(http.StatusServiceUnavailable, "the gateway holds %d bytes of request bodies, its bound; try again", g.MaxRequestBytesInFlight)
	case isTimeout(err):
		return nil, held, refuseFraming(http.StatusRequestTimeout, "request body not received within %v", g.BodyTimeout)
	}
	return nil, held, refuseFraming(http.StatusBadRequest, "failed to read the request body")
}

// errBudget is a body that would take the bodies in flight past their
// bound (MaxRequestBytesInFlight, MaxResponseBytesInFlight).
var errBudget = errors.New("bodies in flight over the bound")

// firstBuffer is the buffer a body of unknown length is read into first.
const firstBuffer = 4 << 10

// readBudgeted reads r whole, at most bound bytes (0: no bound), into a
// buffer that grows as bytes arrive (to the length declared, if not
// negative, or by doubling), each growth taken from the budget used
// (whose bound is budget; 0: none) first. held is what it took, to give
// back when the body is no longer held, even on error.
func readBudgeted(r io.Reader, length, bound, budget int64, used *atomic.Int64) (b []byte, held int64, err error) {
	limit := bound + 1 // a byte past the bound tells a body over it
	if bound <= 0 {
		limit = -1
	}
	if length >= 0 && (limit < 0 || length < limit) {
		limit = length + 1 // the reader ends the body at its length
	}
	for {
		if len(b) == cap(b) {
			size := max(2*int64(cap(b)), firstBuffer)
			if limit >= 0 {
				size = min(size, limit)
			}
			if size <= int64(cap(b)) {
				// A byte past the bound, or past the declared length
				// (which net/http's reader never returns).
				return nil, held, errTooLarge
			}
			if !take(used, budget, size-int64(cap(b))) {
				return nil, held, errBudget
			}
			held += size - int64(cap(b))
			nb := make([]byte, len(b), size)
			copy(nb, b)
			b = nb
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, held, nil
		}
		if err != nil {
			return nil, held, err
		}
	}
}

// take takes n bytes from a budget of max (0: no bound), if they are
// there.
func take(used *atomic.Int64, max, n int64) bool {
	if max <= 0 {
		used.Add(n)
		return true
	}
	if used.Add(n) > max {
		used.Add(-n)
		return false
	}
	return true
}

var errTooLarge = errors.New("too large")

// readBounded reads r whole, failing with errTooLarge past max bytes (0:
// no bound).
func readBounded(r io.Reader, max int64) ([]byte, error) {
	if max <= 0 {
		return io.ReadAll(r)
	}
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err == nil && int64(len(b)) > max {
		return nil, errTooLarge
	}
	return b, err
}
