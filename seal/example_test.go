package seal_test

import (
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/seal"
)

// A tool handler seals the state it needs on the retry, bound to the
// request, and opens it when the client sends it back.
func Example() {
	ring, err := keyring.Generate(keyring.AEAD)
	if err != nil {
		log.Fatal(err)
	}
	s, err := seal.New(ring, nil)
	if err != nil {
		log.Fatal(err)
	}

	args := testkit.Must(seal.ArgsDigest([]byte(`{"from":"BER","to":"LIS"}`)))
	b := seal.Binding{
		Method:     "tools/call",
		Target:     "book_flight",
		Principal:  "user-1234",
		Audience:   "https://flights.example",
		ArgsDigest: args,
	}
	token, err := s.Seal(b, []byte(`{"step":2,"fare":"F12"}`), 5*time.Minute)
	if err != nil {
		log.Fatal(err)
	}

	// ... the client answers the prompt and retries with the token ...

	state, err := s.Open(b, token)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(state))

	// The same token presented by another user is rejected.
	other := b
	other.Principal = "user-9999"
	_, err = s.Open(other, token)
	fmt.Println(errors.Is(err, seal.ErrInvalid), seal.Reason(err))
	// Output:
	// {"step":2,"fare":"F12"}
	// true invalid
}

func ExampleArgsDigest() {
	a := testkit.Must(seal.ArgsDigest([]byte(`{"to":"LIS","from":"BER"}`)))
	b := testkit.Must(seal.ArgsDigest([]byte(`{ "from": "BER", "to": "LIS", "_meta": {"progressToken": 1} }`)))
	fmt.Println(string(a) == string(b))
	// Output: true
}

func ExampleSealer_AppendSeal() {
	ring := testkit.Must(keyring.Generate(keyring.MAC))
	s := testkit.Must(seal.New(ring, nil))
	b := seal.Binding{Method: "tools/call", Target: "search"}

	// Reused buffers: no allocation per call once they are large enough.
	tok := make([]byte, 0, 512)
	out := make([]byte, 0, 256)
	tok, err := s.AppendSeal(tok[:0], b, []byte("page=2"), time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	out, err = s.AppendOpen(out[:0], b, tok)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(out))
	// Output: page=2
}

func ExampleInspect() {
	ring := testkit.Must(keyring.Generate(keyring.AEAD))
	s := testkit.Must(seal.New(ring, nil))
	tok := testkit.Must(s.Seal(seal.Binding{Target: "t"}, make([]byte, 16), 90*time.Second))

	h, err := seal.Inspect(tok) // unverified: for logs and debugging only
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(h.Algorithm, h.Expiry.Sub(h.IssuedAt), h.PayloadLen)
	// Output: aead 1m30s 16
}
