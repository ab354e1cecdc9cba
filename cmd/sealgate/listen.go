package main

import (
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"time"
)

// A connLimiter is a listener that serves at most max client connections
// at once. At the cap, a new connection takes the place of the keep-alive
// connection idle longest, which is closed: one client's idle connections
// cannot keep every other client out until -client-idle-timeout. With
// none idle (every connection in a request, or sending its headers,
// which -read-header-timeout bounds), the new connection waits for one
// to close. Its state hook must be the http.Server's ConnState.
type connLimiter struct {
	net.Listener
	max int

	mu     sync.Mutex
	cond   *sync.Cond // signalled when a connection closes or goes idle
	conns  map[*limitedConn]struct{}
	closed bool
}

func limitConns(ln net.Listener, max int) *connLimiter {
	l := &connLimiter{Listener: ln, max: max, conns: map[*limitedConn]struct{}{}}
	l.cond = sync.NewCond(&l.mu)
	return l
}

type limitedConn struct {
	net.Conn
	l         *connLimiter
	once      sync.Once
	idleSince time.Time // zero unless idle between requests; under l.mu
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.cond.Broadcast()
		c.l.mu.Unlock()
	})
	return err
}

func (l *connLimiter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	for len(l.conns) >= l.max && !l.closed {
		if idle := l.idlest(); idle != nil {
			idle.idleSince = time.Time{}
			l.mu.Unlock()
			idle.Close() // its slot is c's
			l.mu.Lock()
			continue
		}
		l.cond.Wait()
	}
	if l.closed {
		l.mu.Unlock()
		c.Close()
		return nil, net.ErrClosed
	}
	lc := &limitedConn{Conn: c, l: l}
	l.conns[lc] = struct{}{}
	l.mu.Unlock()
	return lc, nil
}

// idlest is the connection idle longest, or nil.
func (l *connLimiter) idlest() *limitedConn {
	var best *limitedConn
	for c := range l.conns {
		if !c.idleSince.IsZero() && (best == nil || c.idleSince.Before(best.idleSince)) {
			best = c
		}
	}
	return best
}

func (l *connLimiter) Close() error {
	l.mu.Lock()
	l.closed = true
	l.cond.Broadcast()
	l.mu.Unlock()
	return l.Listener.Close()
}

// state is the server's ConnState hook: it tells which connections are
// idle between requests.
func (l *connLimiter) state(c net.Conn, s http.ConnState) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if s == http.StateIdle {
		lc.idleSince = time.Now()
		l.cond.Broadcast()
	} else {
		lc.idleSince = time.Time{}
	}
}
