// Command proxycompare measures, in one run, what sealgate costs against
// the proxies platform teams put in front of MCP servers today: nginx
// (Debian's, proxy_pass with upstream keep-alive) and a plain
// httputil.ReverseProxy that reads the body first. Each proxy is its own
// process in front of the same minimal upstream (a process too); wrk
// sends the retry of a two-round tools/call, carrying the state the
// first round got through that proxy (sealed by sealgate, plain through
// the others), from 1, 16, 64 and 256 connections. The targets take turns
// at each level, so the machine's load moves them alike.
//
// Per target and level it prints the CPU per request of the proxy's
// processes (user+system from /proc, nginx's master and workers summed),
// requests/s, the p50 and p99 wrk saw, and the p99 added over the
// upstream reached straight in the same turn.
//
// Two floors run beside them (floors.go): nethttp-floor, net/http's
// server forwarding with the cheapest client there is, and go-floor, a
// Go proxy without net/http. They show what is left for a proxy to spend
// before it does any work of its own.
//
//	go build -o /tmp/sealgate ./cmd/sealgate
//	cd bench && go run ./cmd/proxycompare -sealgate /tmp/sealgate [-d 5s] [-turns 3]
//
// It needs nginx and wrk on PATH (apt-get install nginx-light wrk).
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const first = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"book","arguments":{"seats":2},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`

func main() {
	switch {
	case len(os.Args) > 2 && os.Args[1] == "upstream":
		serveUpstream(os.Args[2])
		return
	case len(os.Args) > 3 && os.Args[1] == "nethttp-floor":
		serveNetHTTPFloor(os.Args[2], os.Args[3])
		return
	case len(os.Args) > 3 && os.Args[1] == "go-floor":
		serveGoFloor(os.Args[2], os.Args[3])
		return
	case len(os.Args) > 3 && os.Args[1] == "proxy":
		serveProxy(os.Args[2], os.Args[3])
		return
	}
	sealgate := flag.String("sealgate", "", "sealgate binary (go build ./cmd/sealgate)")
	dur := flag.Duration("d", 5*time.Second, "length of one turn")
	turns := flag.Int("turns", 3, "turns per target and level")
	levels := flag.String("c", "1,16,64,256", "connections, comma-separated")
	other := flag.String("b", "", "a second sealgate binary, run as target sealgate-b (to compare two builds in one run)")
	otherEnv := flag.String("b-env", "", "environment for sealgate-b, space-separated NAME=VALUE (GOGC=400, say)")
	flag.Parse()
	if *sealgate == "" {
		log.Fatal("proxycompare: -sealgate is required")
	}
	dir, err := os.MkdirTemp("", "proxycompare")
	check(err)
	defer os.RemoveAll(dir)

	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			p.Process.Signal(syscall.SIGTERM) // nginx's master then stops its workers
			p.Wait()
		}
	}()
	start := func(env []string, name string, args ...string) *exec.Cmd {
		c := exec.Command(name, args...)
		c.Env = append(os.Environ(), env...)
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM} // none outlives a log.Fatal
		c.Stderr = os.Stderr
		check(c.Start())
		procs = append(procs, c)
		return c
	}
	self, err := os.Executable()
	check(err)
	upAddr, proxyAddr, gateAddr, nginxAddr := freeAddr(), freeAddr(), freeAddr(), freeAddr()
	up := start(nil, self, "upstream", upAddr)
	proxy := start(nil, self, "proxy", proxyAddr, "http://"+upAddr)
	netFloorAddr, goFloorAddr := freeAddr(), freeAddr()
	netFloor := start(nil, self, "nethttp-floor", netFloorAddr, upAddr)
	goFloor := start(nil, self, "go-floor", goFloorAddr, upAddr)
	gate := func(env []string, bin, addr string) *exec.Cmd {
		return start(env, bin, "-upstream", "http://"+upAddr, "-audience", "https://bench.test", "-principal", "anonymous",
			"-listen", addr, "-admin-listen", "", "-log-level", "error")
	}
	g := gate(nil, *sealgate, gateAddr)
	check(os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(nginxConf(nginxAddr, upAddr, dir)), 0o644))
	ngx := start(nil, "nginx", "-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-e", filepath.Join(dir, "error.log"))

	targets := []target{
		{name: "direct", addr: upAddr, pids: func() []int { return nil }},
		{name: "nginx", addr: nginxAddr, pids: func() []int { return family(ngx.Process.Pid) }},
		{name: "ReverseProxy", addr: proxyAddr, pids: func() []int { return []int{proxy.Process.Pid} }},
		{name: "nethttp-floor", addr: netFloorAddr, pids: func() []int { return []int{netFloor.Process.Pid} }},
		{name: "go-floor", addr: goFloorAddr, pids: func() []int { return []int{goFloor.Process.Pid} }},
		{name: "sealgate", addr: gateAddr, pids: func() []int { return []int{g.Process.Pid} }},
	}
	if *other != "" {
		addr := freeAddr()
		gb := gate(strings.Fields(*otherEnv), *other, addr)
		targets = append(targets, target{name: "sealgate-b", addr: addr, pids: func() []int { return []int{gb.Process.Pid} }})
	}
	upCPU := cpuOf([]int{up.Process.Pid})
	defer func() {
		fmt.Printf("upstream: %.1f s of CPU in all\n", (cpuOf([]int{up.Process.Pid}) - upCPU).Seconds())
	}()
	for i := range targets {
		t := &targets[i]
		waitUp(t.addr)
		t.script = filepath.Join(dir, t.name+".lua")
		retry := retryBody(t.addr)
		check(os.WriteFile(t.script, []byte(wrkScript(retry)), 0o644))
	}
	fmt.Printf("proxycompare %s, %d turns of %s per target and level, GOMAXPROCS unset, nginx workers auto\n",
		time.Now().UTC().Format(time.RFC3339), *turns, *dur)
	fmt.Printf("%6s %-13s %10s %10s %9s %9s %11s\n", "conns", "target", "cpu µs/req", "req/s", "p50", "p99", "added p99")
	for _, cs := range strings.Split(*levels, ",") {
		c, err := strconv.Atoi(cs)
		check(err)
		res := make(map[string]*sum)
		for turn := 0; turn < *turns; turn++ {
			var direct result
			for i, t := range targets {
				r := run(t, c, *dur)
				if i == 0 {
					direct = r
				}
				s := res[t.name]
				if s == nil {
					s = &sum{}
					res[t.name] = s
				}
				s.cpu += r.cpu
				s.reqs += r.reqs
				s.secs += r.secs
				s.p50 = append(s.p50, r.p50)
				s.p99 = append(s.p99, r.p99)
				s.added = append(s.added, r.p99-direct.p99)
			}
		}
		for _, t := range targets {
			s := res[t.name]
			cpu := "-"
			if t.name != "direct" {
				cpu = fmt.Sprintf("%.1f", float64(s.cpu.Microseconds())/float64(s.reqs))
			}
			fmt.Printf("%6d %-13s %10s %10.0f %9s %9s %11s\n", c, t.name, cpu, float64(s.reqs)/s.secs,
				median(s.p50), median(s.p99), median(s.added))
		}
	}
}

type target struct {
	name, addr, script string
	pids               func() []int
}

type result struct {
	cpu      time.Duration
	reqs     int64
	secs     float64
	p50, p99 time.Duration
}

type sum struct {
	cpu             time.Duration
	reqs            int64
	secs            float64
	p50, p99, added []time.Duration
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2].Round(time.Microsecond)
}

// run loads t with wrk for d from c connections and reads what its
// processes spent.
func run(t target, c int, d time.Duration) result {
	threads := 2
	if c < 2 {
		threads = 1
	}
	before := cpuOf(t.pids())
	out, err := exec.Command("wrk", "-t", strconv.Itoa(threads), "-c", strconv.Itoa(c), "-d", d.String(),
		"--latency", "-s", t.script, "http://"+t.addr+"/mcp").CombinedOutput()
	after := cpuOf(t.pids())
	if err != nil {
		log.Fatalf("wrk against %s: %v\n%s", t.name, err, out)
	}
	s := string(out)
	if strings.Contains(s, "Non-2xx") || strings.Contains(s, "Socket errors") {
		log.Fatalf("wrk against %s saw errors:\n%s", t.name, s)
	}
	r := result{cpu: after - before, secs: d.Seconds()}
	m := regexp.MustCompile(`(\d+) requests in ([\d.]+)(m?s)`).FindStringSubmatch(s)
	if m == nil {
		log.Fatalf("wrk output:\n%s", s)
	}
	r.reqs, _ = strconv.ParseInt(m[1], 10, 64)
	r.p50 = latency(s, "50%")
	r.p99 = latency(s, "99%")
	return r
}

func latency(out, pct string) time.Duration {
	m := regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(pct) + `\s+([\d.]+)(us|ms|s)\s*$`).FindStringSubmatch(out)
	if m == nil {
		log.Fatalf("no %s latency in:\n%s", pct, out)
	}
	d, err := time.ParseDuration(m[1] + strings.Replace(m[2], "us", "µs", 1))
	check(err)
	return d
}

// cpuOf sums user+system time of the processes, from /proc/PID/stat.
func cpuOf(pids []int) time.Duration {
	var ticks int64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		check(err)
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + s
	}
	return time.Duration(ticks) * 10 * time.Millisecond // CLK_TCK is 100 on Linux
}

// family is pid and its children (nginx's workers).
func family(pid int) []int {
	pids := []int{pid}
	ents, err := os.ReadDir("/proc")
	check(err)
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
		if f[1] == strconv.Itoa(pid) {
			pids = append(pids, p)
		}
	}
	return pids
}

func retryBody(addr string) string {
	out := post(addr, first)
	_, tok, ok := strings.Cut(out, `"requestState":"`)
	if !ok {
		log.Fatalf("first round through %s: no state in %s", addr, out)
	}
	tok, _, _ = strings.Cut(tok, `"`)
	second := strings.Replace(first[:len(first)-2], `"id":1`, `"id":2`, 1) + `,"requestState":"` + tok + `"}}`
	if out := post(addr, second); !strings.Contains(out, "state-ok") {
		log.Fatalf("retry through %s: %s", addr, out)
	}
	return second
}

func post(addr, body string) string {
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/mcp", strings.NewReader(body))
	check(err)
	setHeaders(req.Header)
	resp, err := http.DefaultClient.Do(req)
	check(err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	check(err)
	return string(b)
}

func setHeaders(h http.Header) {
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	h.Set("MCP-Protocol-Version", "2026-07-28")
}

func wrkScript(body string) string {
	return fmt.Sprintf(`wrk.method = "POST"
wrk.body = %q
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
`, body)
}

func nginxConf(listen, up, dir string) string {
	return fmt.Sprintf(`daemon off;
master_process on;
worker_processes auto;
pid %[3]s/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path %[3]s/body;
  proxy_temp_path %[3]s/proxy;
  fastcgi_temp_path %[3]s/fastcgi;
  uwsgi_temp_path %[3]s/uwsgi;
  scgi_temp_path %[3]s/scgi;
  upstream mcp { server %[2]s; keepalive 256; }
  server {
    listen %[1]s;
    location / {
      proxy_pass http://mcp;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
`, listen, up, dir)
}

// serveUpstream is the minimal MCP server: the first round asks for
// input with a plain state, the retry answers.
func serveUpstream(addr string) {
	ask := []byte(`{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"confirm":{"method":"elicitation/create","params":{"message":"ok?","requestedSchema":{"type":"object","properties":{}}}}},"requestState":"plain:state-of-the-first-round"}}`)
	done := []byte(`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"state-ok"}]}}`)
	log.Fatal(http.ListenAndServe(addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if bytes.Contains(b, []byte(`"requestState"`)) {
			w.Write(done)
			return
		}
		w.Write(ask)
	})))
}

// serveProxy is a plain httputil.ReverseProxy that reads the body first,
// as sealgate and nginx do, with sealgate's transport settings.
func serveProxy(addr, up string) {
	u, err := url.Parse(up)
	check(err)
	p := httputil.NewSingleHostReverseProxy(u)
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 0, 256
	p.Transport = t
	// wrk cuts its connections at the end of each turn; the requests in
	// flight then fail, and wrk's own count of errors is what matters.
	p.ErrorLog = log.New(io.Discard, "", 0)
	log.Fatal(http.ListenAndServe(addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		p.ServeHTTP(w, r)
	})))
}

func waitUp(addr string) {
	for i := 0; i < 200; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	log.Fatalf("nothing listens on %s", addr)
}

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	defer ln.Close()
	return ln.Addr().String()
}

func check(err error) {
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}
