package gateway

import (
	"bytes"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// FuzzBridge feeds any bytes to what the bridge reads: a legacy
// client's message, its params as they go upstream, the capabilities it
// offers a client, the ids it takes, an input request's capability
// check, and the SSE events the walk writes back to it. Nothing panics;
// what goes upstream is valid JSON with the 2026-07-28 _meta; what the
// bridge offers a client has no subscribe or listChanged.
func FuzzBridge(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay","arguments":{},"_meta":{"progressToken":1}}}`,
		`{"jsonrpc":"2.0","id":"sg-0a-00","result":{"action":"accept"}}`,
		`{"tools":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true}}`,
		`{"elicitation":{"url":{}},"sampling":{}}`, `{"mode":"URL"}`, `-0`, `123456789012345678`, `1e3`,
		"data: {\"jsonrpc\":\"2.0\",\"id\":\"sg-1\",\"result\":{}}\n\n", "data: a\ndata: b\r\n\r\n", `null`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m legacyMessage
		_ = json.Unmarshal(b, &m)
		_ = m.isResponse()
		s := &session{Version: "2025-11-25", Caps: jsontext.Value(`{"elicitation":{}}`), Nonce: "n"}
		if p, err := upstreamParams(b, s); err == nil {
			out, err := json.Marshal(p)
			if err != nil || !jsontext.Value(out).IsValid() || !bytes.Contains(p["_meta"], []byte(metaVersion)) {
				t.Fatalf("upstream params %q from %q: %v", out, b, err)
			}
			_ = targetOf("tools/call", p)
			_ = targetOf("resources/read", p)
		}
		if v := jsontext.Value(b); v.IsValid() {
			c := bridgedCaps(v)
			if v.Kind() == '{' && (bytes.Contains(c, []byte(`"subscribe"`)) || bytes.Contains(c, []byte(`"listChanged"`))) {
				var outer map[string]jsontext.Value
				if json.Unmarshal(v, &outer) == nil {
					for _, k := range []string{"tools", "prompts", "resources"} {
						if sub := outer[k]; sub.Kind() == '{' && strings.Contains(string(c), k) {
							var inner map[string]jsontext.Value
							if json.Unmarshal(sub, &inner) == nil {
								var got map[string]map[string]jsontext.Value
								if json.Unmarshal(c, &got) == nil {
									if _, ok := got[k]["subscribe"]; ok {
										t.Fatalf("bridgedCaps kept %s.subscribe: %s", k, c)
									}
									if _, ok := got[k]["listChanged"]; ok {
										t.Fatalf("bridgedCaps kept %s.listChanged: %s", k, c)
									}
								}
							}
						}
					}
				}
			}
			_ = declared(s, "elicitation/create", v)
			_ = integerID(v)
		}
		r := newEventReader(bytes.NewReader(b), 1<<10)
		for range 64 {
			d, err := r.next()
			if err != nil {
				break
			}
			if int64(len(d)) > 1<<10 {
				t.Fatalf("an event of %d bytes past the bound", len(d))
			}
		}
		_ = holder(string(b))
	})
}
