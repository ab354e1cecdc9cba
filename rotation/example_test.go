package rotation_test

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
	"github.com/stateseal/stateseal/rotation"
)

// A routine rotation: the new key waits one propagation delay, and the old
// one can be retired once every token it sealed has expired.
func ExampleRotate() {
	dir := testkit.Must(os.MkdirTemp("", "stateseal"))
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "keyset.json")
	ctx := context.Background()
	testkit.Check(backends.GenerateLocal(filepath.Join(dir, "kek")))

	now := time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)
	o := &rotation.Options{KEK: "local:kek", Now: func() time.Time { return now }}
	first, err := rotation.Init(ctx, path, "local:kek", keyring.AEAD, keyring.DefaultPolicy(), o)
	if err != nil {
		log.Fatal(err)
	}
	res, err := rotation.Rotate(ctx, path, nil, o)
	if err != nil {
		log.Fatal(err)
	}
	k, _ := res.Keyset.Key(res.Key)
	fmt.Println("new key seals from", k.Activation.Format(time.TimeOnly))

	safe, _ := rotation.SafeToRetire(res.Keyset, first.Key)
	fmt.Println("old key retires from", safe.Format(time.TimeOnly))
	_, err = rotation.Retire(ctx, path, first.Key, nil, o)
	fmt.Println("retire now:", err != nil)
	// Output:
	// new key seals from 12:10:00
	// old key retires from 13:10:30
	// retire now: true
}
