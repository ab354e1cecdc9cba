//go:build unix

package redis_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stateseal/stateseal/backends/kektest"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/internal/testservers"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/rotation"
	"github.com/stateseal/stateseal/rotation/faulttest"
	"github.com/stateseal/stateseal/stores/redis"
)

// TestManyLoaders measures loaders following one keyset on one Redis:
// the time from a rotation's write to the last loader's install,
// connections and Redis commands per loader per minute, memory per
// loader. STATESEAL_LOADERS sets the count (default 200; docs/BENCHMARKS.md
// quotes 1000), STATESEAL_LOADER_PROCS the processes they are spread over
// (default 1). Loaders poll every 30 s and are told of writes by the
// store's subscription, one per process. STATESEAL_LOADER_OWN_CLIENTS=1
// gives each loader a client of its own instead: the anchor, what a
// loader cost before stores shared clients.
//
//	STATESEAL_LOADERS=1000 go test -run TestManyLoaders -v ./stores/redis/
//	STATESEAL_LOADERS=1000 STATESEAL_LOADER_PROCS=4 go test -run TestManyLoaders -v ./stores/redis/
func TestManyLoaders(t *testing.T) {
	if os.Getenv("STATESEAL_LOADER_CHILD") != "" {
		t.Skip("the parent runs this")
	}
	n, procs := envInt("STATESEAL_LOADERS", 200), envInt("STATESEAL_LOADER_PROCS", 1)
	ctx := context.Background()
	r := testservers.StartRedis(t)
	loc := r.URL() + "?key=" + newKey()
	kek := kektest.LocalKEK(t, t.TempDir())
	o := &rotation.Options{KEK: kek, Logger: slog.New(slog.DiscardHandler)}
	if _, err := rotation.Init(ctx, loc, kek, keyring.AEAD, keyring.DefaultPolicy(), o); err != nil {
		t.Fatal(err)
	}
	admin := goredis.NewClient(&goredis.Options{Addr: r.Addr()})
	defer admin.Close()
	baseClients := infoInt(t, admin, "clients", "connected_clients")

	var mu sync.Mutex
	installs := map[uint64][]time.Time{}
	record := func(v uint64, at time.Time) {
		mu.Lock()
		installs[v] = append(installs[v], at)
		mu.Unlock()
	}
	var heapPer float64
	if procs == 1 {
		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		stop := runLoaders(t, loc, kek, n, func(v uint64) { record(v, time.Now()) })
		defer stop()
		var after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&after)
		heapPer = float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
	} else {
		var ready sync.WaitGroup
		for i := range procs {
			ready.Add(1)
			startChild(t, loc, kek, n/procs+boolInt(i < n%procs), record, ready.Done)
		}
		ready.Wait()
	}
	// Every process's one subscription is up: a rotation now reaches all.
	channel := strings.TrimPrefix(loc[strings.Index(loc, "?key="):], "?key=") + ":changed"
	waitLongT(t, 60*time.Second, "the subscriptions", func() bool {
		m, err := admin.PubSubNumSub(ctx, channel).Result()
		if os.Getenv("STATESEAL_LOADER_OWN_CLIENTS") != "" {
			return err == nil && m[channel] == int64(n)
		}
		return err == nil && m[channel] == int64(procs)
	})
	conns := infoInt(t, admin, "clients", "connected_clients") - baseClients

	// Idle: what following the keyset costs Redis with nothing changing.
	cmd0 := infoInt(t, admin, "stats", "total_commands_processed")
	idle := time.Duration(envInt("STATESEAL_LOADER_IDLE_SECONDS", 10)) * time.Second
	time.Sleep(idle) // a measurement window, not a wait for a condition
	perMin := float64(infoInt(t, admin, "stats", "total_commands_processed")-cmd0-2) / idle.Minutes() / float64(n)

	rotations := envInt("STATESEAL_LOADER_ROTATIONS", 10)
	cpu0 := cpuTime()
	var lat []time.Duration
	for range rotations {
		start := time.Now()
		res, err := rotation.Rotate(ctx, loc, nil, o)
		if err != nil {
			t.Fatal(err)
		}
		v := res.Keyset.Version
		waitLongT(t, 20*time.Second, fmt.Sprintf("%d installs of version %d", n, v), func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(installs[v]) >= n
		})
		mu.Lock()
		last := installs[v][0]
		for _, at := range installs[v] {
			if at.After(last) {
				last = at
			}
		}
		mu.Unlock()
		lat = append(lat, last.Sub(start))
	}
	cpuPer := (cpuTime() - cpu0) / time.Duration(rotations*n)
	t.Logf("%d loaders in %d process(es): write to last install p50 %v, p99 %v, max %v over %d rotations; %d connections (%.3f per loader); %.2f Redis commands per loader per minute idle (%v window, 30 s polls); heap %.1f KiB and CPU %v per loader per rotation (this process only)",
		n, procs, faulttest.Pct(lat, 50).Round(time.Millisecond), faulttest.Pct(lat, 99).Round(time.Millisecond), faulttest.Pct(lat, 100).Round(time.Millisecond), rotations,
		conns, float64(conns)/float64(n), perMin, idle, heapPer/1024, cpuPer)
}

// runLoaders starts n loaders in this process and returns what stops them.
func runLoaders(t testing.TB, loc, kek string, n int, installed func(uint64)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var loaders []*keyset.Loader
	own := os.Getenv("STATESEAL_LOADER_OWN_CLIENTS") != ""
	for range n {
		l := &keyset.Loader{Path: loc, Options: keyset.LoadOptions{KEK: kek}, Logger: slog.New(slog.DiscardHandler),
			OnReload: func(ks *keyset.Keyset) { installed(ks.Version) }}
		if own {
			// The anchor: a client per loader, as before stores shared
			// them (a pool and a subscription each, no shared reads).
			u := testkit.Must(url.Parse(loc))
			c := goredis.NewClient(&goredis.Options{Addr: u.Host})
			l.Store = redis.New(c, u.Query().Get("key"), nil)
			t.Cleanup(func() { c.Close() })
		}
		if _, err := l.Load(ctx); err != nil {
			t.Fatal(err)
		}
		loaders = append(loaders, l)
		wg.Add(1)
		go func() { defer wg.Done(); l.Run(ctx, 30*time.Second) }()
	}
	return func() {
		cancel()
		wg.Wait()
		for _, l := range loaders {
			l.Close()
		}
	}
}

// TestLoaderChild is a process of TestManyLoaders: it runs loaders and
// prints each install, "INSTALL version unixnano", until its stdin closes.
func TestLoaderChild(t *testing.T) {
	if os.Getenv("STATESEAL_LOADER_CHILD") == "" {
		t.Skip("run by TestManyLoaders")
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	stop := runLoaders(t, os.Getenv("STATESEAL_LOADER_LOC"), os.Getenv("STATESEAL_LOADER_KEK"), envInt("STATESEAL_LOADER_CHILD", 1), func(v uint64) {
		at := time.Now().UnixNano()
		mu.Lock()
		fmt.Fprintf(out, "INSTALL %d %d\n", v, at)
		out.Flush()
		mu.Unlock()
	})
	defer stop()
	mu.Lock()
	fmt.Fprintln(out, "READY")
	out.Flush()
	mu.Unlock()
	bufio.NewReader(os.Stdin).ReadString('\n') // until the parent closes it
}

func startChild(t *testing.T, loc, kek string, n int, record func(uint64, time.Time), ready func()) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestLoaderChild$", "-test.v")
	cmd.Env = append(os.Environ(), "STATESEAL_LOADER_CHILD="+strconv.Itoa(n), "STATESEAL_LOADER_LOC="+loc, "STATESEAL_LOADER_KEK="+kek)
	cmd.SysProcAttr = testservers.SysProcAttr()
	stdin := testkit.Must(cmd.StdinPipe())
	stdout := testkit.Must(cmd.StdoutPipe())
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	go func() {
		sc := bufio.NewScanner(stdout)
		once := sync.Once{}
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 1 && f[0] == "READY" {
				once.Do(ready)
			}
			if len(f) == 3 && f[0] == "INSTALL" {
				v := testkit.Must(strconv.ParseUint(f[1], 10, 64))
				ns := testkit.Must(strconv.ParseInt(f[2], 10, 64))
				record(v, time.Unix(0, ns))
			}
		}
	}()
}

func infoInt(t testing.TB, c *goredis.Client, section, field string) int {
	info, err := c.Info(context.Background(), section).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n := testkit.Must(strconv.Atoi(v))
			return n
		}
	}
	t.Fatalf("INFO %s has no %s", section, field)
	return 0
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// waitLongT is testkit.WaitFor with a bound for many loaders.
func waitLongT(t testing.TB, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// cpuTime is the CPU this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
