package mrtr_test

import (
	"context"
	"fmt"
	"log"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/seal"
)

// A handler's state sealed for one request opens only on the retry of the
// same request: same tool, same user, same arguments.
func Example() {
	ring := testkit.Must(keyring.Generate(keyring.AEAD))
	s := testkit.Must(seal.New(ring, nil))
	m, err := mrtr.New(s, &mrtr.Options{Audience: "https://flights.example"})
	if err != nil {
		log.Fatal(err)
	}
	r := mrtr.Request{
		Method:    mrtr.MethodCallTool,
		Target:    "book_flight",
		Principal: "alice",
		Arguments: []byte(`{"from":"BER","to":"LIS"}`),
	}
	token, err := m.Seal(r, `{"step":"confirm","fare":129}`) // the requestState sent
	if err != nil {
		log.Fatal(err)
	}

	// The retry carries the answers, which the digest leaves out.
	r.Arguments = []byte(`{"to":"LIS","from":"BER","inputResponses":{"confirm":{"action":"accept"}}}`)
	state, err := m.Open(context.Background(), r, token)
	fmt.Println(state, err)

	r.Principal = "mallory"
	_, err = m.Open(context.Background(), r, token)
	fmt.Println(seal.Reason(err))
	// Output:
	// {"step":"confirm","fare":129} <nil>
	// invalid
}
