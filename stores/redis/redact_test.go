package redis_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/stateseal/stateseal/internal/testservers"
	"github.com/stateseal/stateseal/stores"
)

// TestNoPasswordShown (finding 5): no store error and no String() shows
// the Redis password, with the right password, a wrong one, or the server
// down; nor does stores.Redact, or an error about a bad URL.
func TestNoPasswordShown(t *testing.T) {
	const password = "s3cret-Redis-pw"
	const wrong = "wr0ng-Redis-pw"
	r := testservers.StartRedisAuth(t, password)
	ctx := context.Background()
	key := newKey()
	loc := r.URL() + "?key=" + key
	if !strings.Contains(loc, password) {
		t.Fatalf("the test's URL %s has no password", loc)
	}
	check := func(what, s string) {
		t.Helper()
		for _, pw := range []string{password, wrong, url.QueryEscape(password)} {
			if strings.Contains(s, pw) {
				t.Errorf("%s shows a password: %s", what, s)
			}
		}
	}
	check("stores.Redact", stores.Redact(loc))
	if got := stores.Redact("/etc/stateseal/keyset.json"); got != "/etc/stateseal/keyset.json" {
		t.Errorf("stores.Redact(a file path) = %q", got)
	}
	s, err := stores.Open(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	check("String", s.String())
	_, _, err = s.Read(ctx)
	if !errors.Is(err, stores.ErrNotFound) {
		t.Fatalf("Read of an empty store with the right password: %v", err)
	}
	check("ErrNotFound", err.Error())
	if _, err := s.Write(ctx, []byte("not a keyset"), ""); err != nil {
		t.Fatal(err)
	}
	_, err = s.Write(ctx, []byte("x"), "")
	check("ErrConflict", err.Error())

	for _, bad := range []string{
		strings.Replace(loc, password, wrong, 1),                                 // a wrong password
		strings.Replace(loc, ":"+password+"@", ":"+wrong+"@", 1) + "&colour=red", // an unknown parameter
		strings.Replace(loc, ":"+password+"@", "default:"+wrong+"@", 1),          // user and wrong password
		strings.Replace(loc, ":"+password+"@", wrong+"@", 1),                     // a lone user name
	} {
		s, err := stores.Open(ctx, bad)
		if err != nil {
			check("Open", err.Error())
			continue
		}
		check("String", s.String())
		_, _, err = s.Read(ctx)
		if err == nil {
			t.Fatalf("Read with a wrong password succeeded")
		}
		check("Read with a wrong password", err.Error())
		_, err = s.Write(ctx, []byte("x"), "")
		check("Write with a wrong password", err.Error())
		_, err = s.(stores.Revisioner).Revision(ctx)
		check("Revision with a wrong password", err.Error())
	}
	// The password from the environment, wrong.
	t.Setenv("REDIS_PASSWORD", wrong)
	s2, err := stores.Open(ctx, "redis://"+r.Addr()+"/0?key="+key)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = s2.Read(ctx)
	if err == nil {
		t.Fatal("Read with a wrong REDIS_PASSWORD succeeded")
	}
	check("Read with a wrong REDIS_PASSWORD", err.Error())

	// The server down.
	r.Stop()
	for _, st := range []stores.Store{s, s2} {
		_, _, err = st.Read(ctx)
		if err == nil {
			t.Fatal("Read with the server down succeeded")
		}
		check("Read with the server down", err.Error())
		_, err = st.Write(ctx, []byte("x"), "")
		check("Write with the server down", err.Error())
	}
}
