package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestClientConnections: through run(), a client's connection is bounded
// in time and count. Headers sent slowly and an idle keep-alive
// connection are closed at their timeouts; with -max-connections 2 held,
// a third connection is served only once one of them has been closed.
func TestClientConnections(t *testing.T) {
	_, up := startUpstream(t)
	r := startRun(t, "-upstream", up, "-principal", "anonymous", "-read-header-timeout", "500ms",
		"-client-idle-timeout", "500ms", "-max-connections", "2")
	waitFor(t, "readiness", r.ready)
	host := strings.TrimPrefix(r.proxy, "http://")
	dial := func() net.Conn {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(20 * time.Second))
		return c
	}
	// closed waits for the server to close c, and returns when it did.
	closed := func(c net.Conn) time.Time {
		io.Copy(io.Discard, c) // until EOF or reset
		return time.Now()
	}

	// Slow headers (slowloris): held, each, until the header timeout.
	slow1, slow2 := dial(), dial()
	io.WriteString(slow1, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
	io.WriteString(slow2, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
	// A third, complete request waits for a slot.
	third := dial()
	io.WriteString(third, "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	c1 := make(chan time.Time, 1)
	go func() { c1 <- closed(slow1) }()
	resp, err := http.ReadResponse(bufio.NewReader(third), nil)
	if err != nil {
		t.Fatal(err)
	}
	answered := time.Now()
	resp.Body.Close()
	closedAt := <-c1
	if answered.Before(closedAt.Add(-50 * time.Millisecond)) {
		t.Fatalf("a third connection was served at %v, before one of two held ones was closed at %v", answered, closedAt)
	}
	if d := closed(slow2); d.Sub(closedAt) > 5*time.Second {
		t.Fatal("the second slow connection was held past the header timeout")
	}

	// An idle keep-alive connection is closed at the idle timeout.
	idle := dial()
	io.WriteString(idle, "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	br := bufio.NewReader(idle)
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	start := time.Now()
	io.Copy(io.Discard, br)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("an idle connection was closed after %v", d)
	}
}

// TestIdleConnectionsAtCap: one client holding every one of
// -max-connections with idle keep-alive connections does not keep
// another out until -client-idle-timeout: at the cap the connection idle
// longest is closed, and the new one is served at once (the cap's
// connection waiting in TestClientConnections waits for headers that are
// slow, not for idle connections).
func TestIdleConnectionsAtCap(t *testing.T) {
	_, up := startUpstream(t)
	r := startRun(t, "-upstream", up, "-principal", "anonymous", "-client-idle-timeout", "2m", "-max-connections", "3")
	waitFor(t, "readiness", r.ready)
	host := strings.TrimPrefix(r.proxy, "http://")
	get := func(c net.Conn, br *bufio.Reader) error {
		io.WriteString(c, "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}
	var idle []net.Conn
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(20 * time.Second))
		if err := get(c, bufio.NewReader(c)); err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	c, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	c.SetDeadline(start.Add(10 * time.Second))
	if err := get(c, bufio.NewReader(c)); err != nil {
		t.Fatalf("a fourth connection, with three idle at the cap: %v after %v", err, time.Since(start))
	}
	// One idle connection (the one idle longest, which the server may
	// mark idle a moment after the client has its answer) was closed for
	// it; the others are still open.
	closed := 0
	for _, c := range idle {
		c.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := c.Read(make([]byte, 1)); err == io.EOF {
			closed++
		}
	}
	if closed != 1 {
		t.Fatalf("%d idle connections closed, want 1", closed)
	}
}
