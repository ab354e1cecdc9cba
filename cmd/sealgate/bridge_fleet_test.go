package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/internal/testservers"
	"github.com/stateseal/stateseal/stores/redis"
)

// balancer is a round-robin reverse proxy over gateways, request by
// request, streaming (as a load balancer in front of a fleet is), and
// says which gateway served a request in X-Served-By.
func balancer(t *testing.T, gws ...*gatewayProc) (string, *atomic.Int64) {
	t.Helper()
	var n, pin atomic.Int64 // pin, if not -1: every request to that gateway
	pin.Store(-1)
	var proxies []*httputil.ReverseProxy
	for i, g := range gws {
		u := testkit.Must(url.Parse(g.proxy))
		p := httputil.NewSingleHostReverseProxy(u)
		p.FlushInterval = -1
		p.Transport = &http.Transport{MaxIdleConnsPerHost: 64} // its own pool, not the test client's
		p.ModifyResponse = func(r *http.Response) error { r.Header.Set("X-Served-By", fmt.Sprint(i)); return nil }
		proxies = append(proxies, p)
	}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Without it, net/http's server closes the request's body when
		// the answer starts (it discards what it thinks unread), and the
		// proxy's transport, which had not yet read the body's end,
		// fails the request and cuts its connection to the gateway: a
		// call's stream cut a few times in a thousand flows, the proxy's,
		// not the gateway's (balancers built for it read the whole
		// request first).
		http.NewResponseController(w).EnableFullDuplex()
		i := int(n.Add(1)-1) % len(proxies)
		if p := pin.Load(); p >= 0 {
			i = int(p)
		}
		proxies[i].ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s.URL, &pin
}

// legacyClient is the clients' own transport (not the balancer's), with
// keep-alive connections, as clients have.
var legacyClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}

// legacyPost is one POST of a 2025-11-25 client.
func legacyPost(url, sid, body string) (*http.Response, error) {
	req, err := http.NewRequest("POST", url+"/mcp", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	return legacyClient.Do(req)
}

// flowResult is what a client saw of one flow: the result's text, the
// answer's HTTP status and body, and which gateways served the call and
// the answer.
type flowResult struct {
	text          string
	answerStatus  int
	answerBody    string
	callBy, ansBy string
	streamErr     error
	err           error // the flow could not start
}

// legacyFlow is one bridged payment of a 2025-11-25 client through url:
// initialize, tools/call pay, the input request read on the call's
// stream, the answer POSTed, the result read. before runs between the
// input request and the answer.
func legacyFlow(url string, before func()) (fr flowResult) { return legacyFlowVia(url, url, before) }

func legacyFlowVia(url, answerURL string, before func()) (fr flowResult) {
	resp, err := legacyPost(url, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}`)
	if err != nil {
		fr.err = err
		return fr
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		fr.err = fmt.Errorf("initialize: %d", resp.StatusCode)
		return fr
	}
	call, err := legacyPost(url, sid, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay","arguments":{}}}`)
	if err != nil {
		fr.err = err
		return fr
	}
	defer call.Body.Close()
	fr.callBy = call.Header.Get("X-Served-By")
	event := sseEvents(call.Body)
	q, err := event()
	if err != nil || q["method"] != "elicitation/create" {
		fr.err = fmt.Errorf("the input request: %v %v", q, err)
		return fr
	}
	if before != nil {
		before()
	}
	id, err := json.Marshal(q["id"])
	if err != nil {
		fr.err = err
		return fr
	}
	ans, err := legacyPost(answerURL, sid, `{"jsonrpc":"2.0","id":`+string(id)+`,"result":{"action":"accept","content":{}}}`)
	if err != nil {
		fr.err = err
		return fr
	}
	b, err := io.ReadAll(ans.Body)
	ans.Body.Close()
	if err != nil {
		fr.err = err
		return fr
	}
	fr.answerStatus, fr.answerBody, fr.ansBy = ans.StatusCode, string(b), ans.Header.Get("X-Served-By")
	final, err := event()
	if err != nil {
		fr.streamErr = err
		return fr
	}
	if r, ok := final["result"].(map[string]any); ok {
		fr.text = fmt.Sprint(r["content"])
	} else {
		fr.text = fmt.Sprint(final["error"])
	}
	return fr
}

// TestBridgeFleet: two gateways behind a round-robin balancer, one Redis
// (the single-use guard's, which carries the bridge's answers too), a
// pay upstream that keeps nothing. 1,000 bridged flows of a 2025-11-25
// client, each answer landing on the other gateway than the one holding
// its call: every one pays, once (counted in the upstream's ledger). Then
// kill -9 of the gateway holding calls: their answers, landing on the
// other, are told the holder is gone (404), the clients' streams end in
// an error, and nothing pays.
func TestBridgeFleet(t *testing.T) {
	r := testservers.StartRedisVolatile(t)
	ledger := newLedger(t)
	up := startPay(t, ledger)
	args := []string{"-upstream", up.URL(), "-keyset", keysetDir(t), "-single-use", "pay", "-replay", r.URL()}
	a, b := startGatewayProc(t, args...), startGatewayProc(t, args...)
	lb, _ := balancer(t, a, b)
	flows := 1000
	if testing.Short() {
		flows = 100
	}
	other := 0
	start := time.Now()
	for i := range flows {
		fr := legacyFlow(lb, nil)
		if fr.err != nil || fr.answerStatus != 202 || !strings.Contains(fr.text, "paid") {
			t.Fatalf("flow %d: %+v\n%s\n%s", i, fr, a.Logs(), b.Logs())
		}
		if fr.callBy != fr.ansBy {
			other++
		}
	}
	t.Logf("%d bridged flows in %v, %d with the answer on the other gateway", flows, time.Since(start).Round(time.Millisecond), other)
	if other != flows {
		t.Fatalf("%d of %d answers landed on the other gateway: the balancer did not alternate", other, flows)
	}
	if n := noDoubles(t, ledger); len(n) != flows {
		t.Fatalf("%d payments in the ledger, want %d", len(n), flows)
	}

	// kill -9 of the holder, mid-call: the calls go to a, their answers
	// to b.
	lbA, pin := balancer(t, a, b)
	pin.Store(0)
	const killed = 3
	var mu sync.Mutex
	var results []flowResult
	var wg sync.WaitGroup
	held := make(chan struct{}, killed)
	release := make(chan struct{})
	for range killed {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fr := legacyFlow(lbA, func() { held <- struct{}{}; <-release })
			mu.Lock()
			results = append(results, fr)
			mu.Unlock()
		}()
	}
	for range killed {
		<-held
	}
	a.cmd.Process.Kill() // SIGKILL
	<-a.exited
	pin.Store(1) // every request from now on to b
	close(release)
	wg.Wait()
	for _, fr := range results {
		if fr.err != nil {
			t.Fatalf("a flow did not start: %v", fr.err)
		}
		if fr.callBy != "0" || fr.ansBy != "1" {
			t.Fatalf("the call went to %s and the answer to %s, want 0 and 1", fr.callBy, fr.ansBy)
		}
		if fr.answerStatus != 404 || !strings.Contains(fr.answerBody, "is gone") || fr.streamErr == nil {
			t.Errorf("a call held by the killed gateway: %+v, want its answer refused 404 (gone) and its stream cut", fr)
		}
	}
	if n := noDoubles(t, ledger); len(n) != flows {
		t.Fatalf("%d payments after the kill, want %d: a flow held by the killed gateway paid", len(n), flows)
	}
	t.Logf("kill -9 of the gateway holding %d calls: each answer refused 404 (%q), each stream cut, none paid", killed, "gone")
}

// TestBridgeRedisRestart: the Redis that relays answers restarts without
// persistence while a call waits on gateway a. The answer, sent to b
// while Redis is down, is refused 503 (try again) and taken nowhere;
// once both gateways have subscribed again, the same answer is taken by
// a and the flow pays, once.
func TestBridgeRedisRestart(t *testing.T) {
	r := testservers.StartRedisVolatile(t)
	ledger := newLedger(t)
	up := startPay(t, ledger)
	args := []string{"-upstream", up.URL(), "-keyset", keysetDir(t), "-bridge-redis", r.URL(), "-bridge-answer-timeout", "2m"}
	a, b := startGatewayProc(t, args...), startGatewayProc(t, args...)
	rc := testkit.Must(redis.NewClient(r.URL()))
	defer rc.Close()
	resp := testkit.Must(legacyPost(a.proxy, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}`))
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	// b's bridge starts (and subscribes) at its first bridged request.
	resp = testkit.Must(legacyPost(b.proxy, sid, `{"jsonrpc":"2.0","id":9,"method":"ping"}`))
	resp.Body.Close()
	subscribed := func() bool {
		chs, err := rc.PubSubChannels(context.Background(), "stateseal:bridge:*").Result()
		return err == nil && len(chs) == 2
	}
	waitFor(t, "both gateways subscribed", subscribed)
	call := testkit.Must(legacyPost(a.proxy, sid, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay","arguments":{}}}`))
	defer call.Body.Close()
	events := sseEvents(call.Body)
	event := func() map[string]any {
		m, err := events()
		if err != nil {
			t.Fatalf("the stream ended: %v", err)
		}
		return m
	}
	q := event()
	answer := `{"jsonrpc":"2.0","id":` + string(testkit.Must(json.Marshal(q["id"]))) + `,"result":{"action":"accept","content":{}}}`
	r.Stop()
	resp = testkit.Must(legacyPost(b.proxy, sid, answer))
	body := testkit.Must(io.ReadAll(resp.Body))
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || bytes.Contains(body, []byte("127.0.0.1")) {
		t.Fatalf("an answer relayed while Redis is down: %d %s, want 503 with Retry-After and no address", resp.StatusCode, body)
	}
	if n := executions(t, ledger); len(n) != 0 {
		t.Fatalf("paid with Redis down: %v", n)
	}
	r.Start()
	waitFor(t, "both gateways subscribed again", subscribed)
	resp = testkit.Must(legacyPost(b.proxy, sid, answer))
	resp.Body.Close()
	if resp.StatusCode != 202 {
		t.Fatalf("the same answer once Redis is back: %d, want 202", resp.StatusCode)
	}
	if final := event(); !strings.Contains(fmt.Sprint(final["result"]), "paid") {
		t.Fatalf("final: %v", final)
	}
	if n := noDoubles(t, ledger); len(n) != 1 {
		t.Fatalf("%d payments, want 1", len(n))
	}
}
