package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

	"github.com/stateseal/stateseal/gateway"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/seal"
)

// A Gateway in front of an MCP server that keeps its requestState in
// plain text: the client only ever sees a sealed token, and the server
// gets its plain state back on the retry.
func ExampleGateway() {
	// The upstream: asks for a confirmation with a plain state, and
	// answers the retry with the state it got.
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg struct {
			ID     json.RawMessage
			Params struct{ RequestState string }
		}
		if err := json.NewDecoder(r.Body).Decode(&msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		res := `{"resultType":"input_required","inputRequests":{},"requestState":"order-42"}`
		if msg.Params.RequestState != "" {
			res = `{"content":[{"type":"text","text":"got ` + msg.Params.RequestState + `"}]}`
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":`+res+`}`)
	}))
	defer upstream.Close()

	ring, err := keyring.Generate(keyring.AEAD) // one key, in memory: one gateway only
	if err != nil {
		log.Fatal(err)
	}
	s, err := seal.New(ring, nil)
	if err != nil {
		log.Fatal(err)
	}
	states, err := mrtr.New(s, &mrtr.Options{Audience: "https://mcp.example.com", AllowAnonymous: true})
	if err != nil {
		log.Fatal(err)
	}
	up, err := url.Parse(upstream.URL)
	if err != nil {
		log.Fatal(err)
	}
	g := &gateway.Gateway{Upstreams: []*url.URL{up}, Principal: gateway.Anonymous{},
		MaxRequestBytes: 1 << 20, MaxResponseBytes: 1 << 20, MaxEventBytes: 1 << 20}
	g.SetStates(states)
	front := httptest.NewServer(g)
	defer front.Close()

	call := func(state string) map[string]any {
		params := `{"name":"order"` + map[bool]string{true: "", false: `,"requestState":"` + state + `"`}[state == ""] + `}`
		resp, err := http.Post(front.URL+"/mcp", "application/json",
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":`+params+`}`))
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct{ Result map[string]any }
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			log.Fatal(err)
		}
		return out.Result
	}
	token := call("")["requestState"].(string)
	fmt.Println("the client sees the plain state:", strings.Contains(token, "order-42"))
	fmt.Println("the retry:", call(token)["content"].([]any)[0].(map[string]any)["text"])
	fmt.Println("a changed token:", call(token[:len(token)-2]+"AA") == nil)
	// Output:
	// the client sees the plain state: false
	// the retry: got order-42
	// a changed token: true
}
