package stores_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/stores"
)

// Every store writes with compare-and-swap on the revision it was read at:
// of two writers that read the same revision, one wins and the other gets
// ErrConflict, whatever hosts they run on.
func ExampleStore() {
	dir := testkit.Must(os.MkdirTemp("", "stores"))
	defer os.RemoveAll(dir)
	ctx := context.Background()
	s := testkit.Must(stores.Open(ctx, filepath.Join(dir, "keyset.json"))) // or vault-kv://..., redis://...

	rev := testkit.Must(s.Write(ctx, []byte(`{"version":1}`), "")) // "": create
	_, err := s.Write(ctx, []byte(`{"version":2}`), rev)
	fmt.Println("first writer:", err)
	_, err = s.Write(ctx, []byte(`{"version":2, "other":true}`), rev) // read at the same revision
	fmt.Println("second writer lost:", errors.Is(err, stores.ErrConflict))
	data, _ := testkit.Must2(s.Read(ctx))
	fmt.Println(string(data))
	// Output:
	// first writer: <nil>
	// second writer lost: true
	// {"version":2}
}
