package gateway

import (
	"os/exec"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/seal"
)

// newStates builds the States a test gateway opens and seals with, as
// cmd/sealgate does.
func newStates(ring *keyring.Ring, o *mrtr.Options) (*mrtr.States, error) {
	s, err := seal.New(ring, nil)
	if err != nil {
		return nil, err
	}
	return mrtr.New(s, o)
}

// waitFor polls cond until it holds, failing the test after 30 seconds
// (longer than testkit.WaitFor: a Redis or a build may be slow to come).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sealctl runs the sealctl command in dir.
func sealctl(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(testkit.Build(t, "github.com/stateseal/stateseal/cmd/sealctl"), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sealctl %s: %v\n%s", args, err, out)
	}
	return string(out)
}

// inspect runs the walk's read of a body and open on ex, as ServeHTTP
// does: the body to send upstream, or the refusal.
func inspect(ex *exchange, body []byte) ([]byte, *refusal) {
	err := ex.readMessages(body)
	if err == nil {
		err = ex.open()
	}
	if err != nil {
		return nil, err.(*refusal)
	}
	return ex.sent, nil
}

// sealJSON runs the walk's reading of a JSON answer and its seal on ex,
// as ServeHTTP does: the body the client gets, or why it is refused.
func sealJSON(ex *exchange, body []byte) ([]byte, error) {
	var a answer
	err := ex.readJSON(&a, body)
	if err == nil {
		err = ex.seal(&a)
	}
	return a.body, err
}
