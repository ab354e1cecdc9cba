package main

// The floors: two proxies that do nothing but forward the benchmark's
// exchange, to show what is left for a proxy to spend before it does any
// work of its own. Neither is a proxy to use: they forward only this
// benchmark's traffic (Content-Length framing, no error handling worth
// the name).

import (
	"bufio"
	"bytes"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
)

// serveNetHTTPFloor is net/http's server with the cheapest client on the
// other side: a pool of upstream connections, each used by the handler's
// goroutine alone (net/http's own request writer and response reader,
// none of http.Transport's goroutines and hand-offs). Nothing a gateway
// on net/http's server can do costs less.
func serveNetHTTPFloor(addr, up string) {
	type conn struct {
		c  net.Conn
		br *bufio.Reader
		bw *bufio.Writer
	}
	pool := make(chan *conn, 512)
	get := func() (*conn, error) {
		select {
		case p := <-pool:
			return p, nil
		default:
		}
		c, err := net.Dial("tcp", up)
		if err != nil {
			return nil, err
		}
		return &conn{c, bufio.NewReader(c), bufio.NewWriter(c)}, nil
	}
	log.Fatal(http.ListenAndServe(addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		p, err := get()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		out, err := http.NewRequest(http.MethodPost, "http://"+up+r.URL.Path, bytes.NewReader(b))
		check(err)
		out.Header["Content-Type"] = r.Header["Content-Type"]
		out.Header["Accept"] = r.Header["Accept"]
		var resp *http.Response
		if err = out.Write(p.bw); err == nil {
			if err = p.bw.Flush(); err == nil {
				resp, err = http.ReadResponse(p.br, out)
			}
		}
		if err != nil {
			p.c.Close()
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		rb, err := io.ReadAll(resp.Body)
		if err != nil || resp.Close {
			p.c.Close()
		} else {
			select {
			case pool <- p:
			default:
				p.c.Close()
			}
		}
		w.Header()["Content-Type"] = resp.Header["Content-Type"]
		w.Header()["Content-Length"] = []string{strconv.Itoa(len(rb))}
		w.WriteHeader(resp.StatusCode)
		w.Write(rb)
	})))
}

// serveGoFloor is a Go proxy without net/http: a goroutine per client
// connection with an upstream connection of its own, headers copied as
// bytes. What Go's runtime and network poller cost by themselves.
func serveGoFloor(addr, up string) {
	ln, err := net.Listen("tcp", addr)
	check(err)
	for {
		c, err := ln.Accept()
		check(err)
		go func() {
			defer c.Close()
			u, err := net.Dial("tcp", up)
			if err != nil {
				return
			}
			defer u.Close()
			cr, ur := bufio.NewReader(c), bufio.NewReader(u)
			cw, uw := bufio.NewWriter(c), bufio.NewWriter(u)
			for relay(cr, uw) == nil && relay(ur, cw) == nil {
			}
		}()
	}
}

// relay copies one message with a Content-Length from r to w.
func relay(r *bufio.Reader, w *bufio.Writer) error {
	n := 0
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return err
		}
		w.Write(line)
		if len(line) <= 2 {
			break
		}
		if k, v, ok := bytes.Cut(line, []byte(":")); ok && bytes.EqualFold(k, []byte("Content-Length")) {
			if n, err = strconv.Atoi(string(bytes.TrimSpace(v))); err != nil {
				return err
			}
		}
	}
	if _, err := io.CopyN(w, r, int64(n)); err != nil {
		return err
	}
	return w.Flush()
}
