package keyset_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/rotation"
	"github.com/stateseal/stateseal/seal"
)

// A server loads the fleet's keyset file and follows it.
func ExampleLoader() {
	dir := testkit.Must(os.MkdirTemp("", "stateseal"))
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "keyset.json")
	ctx := context.Background()
	// What "sealctl init" does: a keyset and a local KEK file.
	testkit.Check(os.WriteFile(filepath.Join(dir, "stateseal.kek"), []byte(mustLocalKey()), 0o600))
	if _, err := rotation.Init(ctx, path, "local:stateseal.kek", keyring.AEAD, keyring.DefaultPolicy(), nil); err != nil {
		log.Fatal(err)
	}

	l := &keyset.Loader{Path: path}
	ring, err := l.Load(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// In a server: go l.Run(ctx, 30*time.Second)
	s := testkit.Must(seal.New(ring, nil))
	tok := testkit.Must(s.Seal(seal.Binding{Target: "t"}, []byte("state"), time.Minute))
	state, err := s.Open(seal.Binding{Target: "t"}, tok)
	fmt.Println(string(state), err, ring.Current().Version())
	// Output: state <nil> 1
}

func mustLocalKey() string { return backends.NewLocalKey() + "\n" }
