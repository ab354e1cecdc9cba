package redisrelay_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stateseal/stateseal/gateway"
	"github.com/stateseal/stateseal/gateway/redisrelay"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/internal/testservers"
	"github.com/stateseal/stateseal/stores/redis"
)

// TestRelay: two instances on one Redis. An answer sent to the other
// reaches its take, and take's verdict comes back (taken, unknown,
// foreign); one sent to an instance that does not listen, or no longer
// does, is ErrRelayGone at once.
func TestRelay(t *testing.T) {
	r := testservers.StartRedisVolatile(t)
	ctx := context.Background()
	a := redisrelay.New(testkit.Must(redis.NewClient(r.URL())))
	b := redisrelay.New(testkit.Must(redis.NewClient(r.URL())))
	got := make(chan gateway.RelayedAnswer, 4)
	stopA, err := a.Listen("aaaa", func(x gateway.RelayedAnswer) error {
		got <- x
		switch x.ID {
		case "unknown":
			return gateway.ErrAnswerUnknown
		case "foreign":
			return gateway.ErrAnswerForeign
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	stopB, err := b.Listen("bbbb", func(gateway.RelayedAnswer) error { return gateway.ErrAnswerUnknown })
	if err != nil {
		t.Fatal(err)
	}
	defer stopB()
	send := func(id string) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return b.Send(ctx, "aaaa", gateway.RelayedAnswer{ID: id, Session: "s", Principal: "alice", Result: []byte(`{"action":"accept"}`)})
	}
	if err := send("ok"); err != nil {
		t.Fatalf("taken: %v", err)
	}
	if x := <-got; x.ID != "ok" || x.Session != "s" || x.Principal != "alice" || string(x.Result) != `{"action":"accept"}` {
		t.Fatalf("the holder got %+v", x)
	}
	if err := send("unknown"); !errors.Is(err, gateway.ErrAnswerUnknown) {
		t.Fatalf("unknown: %v", err)
	}
	if err := send("foreign"); !errors.Is(err, gateway.ErrAnswerForeign) {
		t.Fatalf("foreign: %v", err)
	}
	if err := b.Send(ctx, "cccc", gateway.RelayedAnswer{ID: "x"}); !errors.Is(err, gateway.ErrRelayGone) {
		t.Fatalf("an instance that never listened: %v, want gone", err)
	}
	stopA()
	if err := send("after"); !errors.Is(err, gateway.ErrRelayGone) {
		t.Fatalf("an instance that stopped: %v, want gone", err)
	}
}

// TestRelayStopSendsVerdict: an instance that stops while it takes an
// answer still sends that answer's verdict: the sender is told it was
// taken (the call it completes may be the last thing the stopping
// instance does), never that the holder could not be reached.
func TestRelayStopSendsVerdict(t *testing.T) {
	r := testservers.StartRedisVolatile(t)
	a := redisrelay.New(testkit.Must(redis.NewClient(r.URL())))
	b := redisrelay.New(testkit.Must(redis.NewClient(r.URL())))
	inTake, release := make(chan struct{}), make(chan struct{})
	stopA := testkit.Must(a.Listen("aaaa", func(gateway.RelayedAnswer) error {
		close(inTake)
		<-release
		return nil
	}))
	stopB := testkit.Must(b.Listen("bbbb", func(gateway.RelayedAnswer) error { return gateway.ErrAnswerUnknown }))
	defer stopB()
	sent := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		sent <- b.Send(ctx, "aaaa", gateway.RelayedAnswer{ID: "x", Session: "s", Result: []byte(`{}`)})
	}()
	<-inTake
	stopped := make(chan struct{})
	go func() { stopA(); close(stopped) }()
	// The stop has ended the subscription (Redis counts no listener)
	// while the answer is still being taken.
	rc := testkit.Must(redis.NewClient(r.URL()))
	defer rc.Close()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		n, err := rc.PubSubNumSub(context.Background(), redisrelay.Prefix+"aaaa").Result()
		if err == nil && n[redisrelay.Prefix+"aaaa"] == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stop did not end the subscription")
		}
	}
	close(release)
	if err := <-sent; err != nil {
		t.Fatalf("an answer taken while its holder stopped: %v, want taken", err)
	}
	<-stopped
}
