package redis

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stateseal/stateseal/stores"
)

// TestOnlyWritesNotRunRetried: a Cluster write is tried again only when
// it provably did not run: Redis's own redirect reply to the script, or a
// node that is no longer a primary before it. A message that quotes a
// redirect after the script ran (WAIT failing in a failover), or a word
// that merely contains one ("TASK "), is not retried: the retry's
// compare-and-swap would fail on the write itself and the caller would
// make its edit twice (found by an attacker review).
func TestOnlyWritesNotRunRetried(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{errors.New("MOVED 3999 127.0.0.1:6381"), true},
		{errors.New("ASK 3999 127.0.0.1:6381"), true},
		{errors.New("CLUSTERDOWN The cluster is down"), true},
		{errors.New("ERR TASK failed"), false},
		{fmt.Errorf("k: %w: the write was made on the primary but WAIT failed (%v)", stores.ErrNotDurable, errors.New("CLUSTERDOWN The cluster is down")), false},
		{fmt.Errorf("k: %w: WAIT failed (MOVED 1 127.0.0.1:1)", stores.ErrNotDurable), false},
	} {
		if got := moved(tc.err); got != tc.want {
			t.Errorf("moved(%q) = %v, want %v", tc.err, got, tc.want)
		}
	}
	wrapped := fmt.Errorf("k: write: %w; nothing was written", errNotPrimary)
	if !errors.As(notRun{wrapped}, new(notRun)) || !errors.Is(notRun{wrapped}, errNotPrimary) {
		t.Error("notRun does not wrap")
	}
	if errors.As(fmt.Errorf("k: %w", stores.ErrNotDurable), new(notRun)) {
		t.Error("a write that ran is marked not run")
	}
}
