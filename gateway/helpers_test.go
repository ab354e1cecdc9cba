package gateway

import (
	"bytes"
	"os/exec"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

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
	req, err := ex.readMessages(body)
	if err == nil {
		err = ex.open(&req)
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

// jsonMarshal writes the messages tests send, as go-json-experiment does.
func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// strayModel is strayState read by jsontext token by token, the
// reference the cutter's walk (eachName) is held to: raw is valid JSON.
func strayModel(raw []byte) bool {
	stray, err := walkTokens(jsontext.NewDecoder(bytes.NewReader(raw)), true, false)
	return stray || err != nil
}

// walkTokens reads one value from dec, reporting a stray requestState in
// it; top says it is the message, result that it is the message's
// result.
func walkTokens(dec *jsontext.Decoder, top, result bool) (bool, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return false, err
	}
	switch tok.Kind() {
	case '{':
		for dec.PeekKind() != '}' {
			nt, err := dec.ReadToken()
			if err != nil {
				return false, err
			}
			name := nt.String()
			if foldsTo(name, "requeststate") && !(result && name == "requestState") {
				return true, nil
			}
			if stray, err := walkTokens(dec, false, top && name == "result"); stray || err != nil {
				return stray, err
			}
		}
	case '[':
		for dec.PeekKind() != ']' {
			if stray, err := walkTokens(dec, false, false); stray || err != nil {
				return stray, err
			}
		}
	default:
		return false, nil
	}
	_, err = dec.ReadToken()
	return false, err
}
