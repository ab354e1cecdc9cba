package mrtr_test

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/seal"
)

// TestRejectionIgnoresArguments: a malformed token, or one naming a key
// the ring does not hold, is rejected before the arguments are digested,
// so 3 MB of arguments cost nothing more than 7 bytes do.
func TestRejectionIgnoresArguments(t *testing.T) {
	m, c := newStates(t, mrtr.Options{})
	big := []byte(`{"blob":"` + strings.Repeat("x", 3<<20) + `"}`)
	other := testkit.Must(keyring.Generate(keyring.AEAD))
	os := testkit.Must(seal.New(other, nil))
	unknown, err := os.Seal(seal.Binding{}, []byte("s"), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		token string
		want  error
	}{
		{"x", seal.ErrMalformed},
		{strings.Repeat("A", 100), seal.ErrMalformed},
		{unknown, seal.ErrUnknownKey},
		{strings.Repeat("A", seal.DefaultMaxTokenLen+1), seal.ErrTooLarge},
	} {
		r := mrtr.Request{Method: mrtr.MethodCallTool, Target: "no-such-tool", Principal: "p", Arguments: big}
		allocated := allocatedBy(func() {
			if _, err := m.Open(ctx, r, tc.token); !errors.Is(err, tc.want) {
				t.Errorf("Open(%.10q...) = %v, want %v", tc.token, err, tc.want)
			}
		})
		// Digesting 3 MB would allocate megabytes; the checks before it
		// allocate a few hundred bytes at most.
		if allocated > 64<<10 {
			t.Errorf("rejecting %.10q... allocated %d bytes: the arguments were digested", tc.token, allocated)
		}
	}
	if v := c.Values(); v.Rejected["invalid"] != 4 {
		t.Errorf("rejections counted: %+v", v)
	}
}

func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
