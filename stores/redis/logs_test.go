package redis_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/stateseal/stateseal/backends/kektest"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/internal/testservers"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/rotation"
)

// TestNoPasswordInLogs: the loader, the editors and the
// scheduler log and return errors about a keyset in a Redis whose URL
// holds a password; none shows it, through a load, a rotation, a tick, a
// reload with Redis down and a load that fails.
func TestNoPasswordInLogs(t *testing.T) {
	const password = "pw-in-the-url-7f3a"
	r := testservers.StartRedisAuth(t, password)
	ctx := context.Background()
	loc := r.URL() + "?key=stateseal:logs" // the password in the URL
	kek := kektest.LocalKEK(t, t.TempDir())
	var logs testkit.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	o := &rotation.Options{KEK: kek, Logger: logger}
	var errs []string
	note := func(err error) {
		if err != nil {
			errs = append(errs, err.Error())
		}
	}
	_, err := rotation.Init(ctx, loc, kek, keyring.AEAD, keyring.DefaultPolicy(), o)
	if err != nil {
		t.Fatal(err)
	}
	l := &keyset.Loader{Path: loc, Options: keyset.LoadOptions{KEK: kek}, Logger: logger, OnError: note}
	if _, err := l.Load(ctx); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = rotation.Rotate(ctx, loc, nil, o)
	note(err)
	note(l.Reload(ctx))
	_, err = (&rotation.Scheduler{Path: loc, Options: *o}).Tick(ctx)
	note(err)
	r.Stop()
	note(l.Reload(ctx))
	_, _, err = keyset.Load(ctx, loc, &keyset.LoadOptions{KEK: kek})
	note(err)
	_, err = rotation.Rotate(ctx, loc, nil, o)
	note(err)
	all := logs.String() + strings.Join(errs, "\n")
	if len(errs) < 3 || !strings.Contains(logs.String(), "stateseal key rotated") {
		t.Fatalf("the test saw too little to mean anything:\n%s", all)
	}
	if strings.Contains(all, password) {
		t.Fatalf("a password in logs or errors:\n%s", all)
	}
	if !strings.Contains(all, "redis://:xxxxx@") {
		t.Fatalf("the store is not named, redacted:\n%s", all)
	}
}
