package gateway

import (
	"fmt"
	"strings"
	"testing"
	"unicode"
)

// TestCheckName: every spelling of a name the gateway reads that
// encoding/json would match to it (each letter replaced by any other of
// its case-folding orbit, ſ and the Kelvin sign included), or pydantic
// (the Python SDK: request_state for requestState), is refused, the name
// itself and other names are not.
func TestCheckName(t *testing.T) {
	for _, sig := range significant {
		s := sig.exact
		if err := checkName(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
		for i, r := range s {
			for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
				name := s[:i] + string(f) + s[i+1:]
				if err := checkName(name); err == nil {
					t.Errorf("%q (for %s) accepted", name, s)
				}
			}
		}
		if err := checkName(strings.ToUpper(s)); err == nil {
			t.Errorf("%q accepted", strings.ToUpper(s))
		}
	}
	for _, name := range []string{"request_state", "Request-State", "request_State", "REQUEST_STATE", "r_e_q_u_e_s_t_s_t_a_t_e",
		"reque\u017ft_state", "-requestState", "requestState_", "input_responses", "meta", "_Meta", "__meta", "n_ame", "_id", "i-d",
		"json_rpc", "Method_", "_params", "re_sult", "error_", "u_r_i", "ARGUMENTS_"} {
		if err := checkName(name); err == nil {
			t.Errorf("%q accepted", name)
		}
	}
	for _, name := range []string{"", "_meta", "inputResponses", "x", "names", "ids", "İd", "ıd", "requestStates", "Ä", "metadata",
		"_metas", "request_states", "_", "--", "is_error", "resultType"} {
		if err := checkName(name); err != nil {
			t.Errorf("%q: %v", name, err)
		}
	}
}

// TestStrayState: a requestState anywhere but as a result's own member is
// found, in every spelling some parser reads as it, whether or not the
// cheap test (onlyResultState) answers first.
func TestStrayState(t *testing.T) {
	for _, tc := range []struct {
		msg   string
		stray bool
	}{
		{`{"jsonrpc":"2.0","id":1,"result":{"requestState":"s"}}`, false},
		{`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"requestState"}],"requestState":"s"}}`, false},
		{`{"jsonrpc":"2.0","id":1,"result":{"x":{"requestState":"s"}}}`, true},
		{`{"jsonrpc":"2.0","id":1,"result":{"requestState":"s","x":[{"RequestState":"s"}]}}`, true},
		{`{"jsonrpc":"2.0","id":1,"result":{"Requeststate":"s"}}`, true},
		{"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"reque\u017ftState\":\"s\"}}", true},
		{`{"jsonrpc":"2.0","id":1,"result":{"requestState":"s","request\u0053tate":"t"}}`, true},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m","data":{"requestState":"s"}}}`, true},
		{`{"jsonrpc":"2.0","method":"notifications/message","params":{"requestState":"s"}}`, true},
		{`{"jsonrpc":"2.0","id":"s1","method":"elicitation/create","params":{"_meta":{"requestState":"s"}}}`, true},
		{`{"jsonrpc":"2.0","id":1,"requestState":"s","result":{}}`, true},
		{`{"jsonrpc":"2.0","id":1,"result":{"request_state":"s"}}`, true},
		{`{"jsonrpc":"2.0","id":1,"result":{"requestState":"s","Request-State":"t"}}`, true},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m","data":{"REQUEST_STATE":"s"}}}`, true},
		{`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"request_state"}],"requestState":"s"}}`, false},
	} {
		m, err := parseObject([]byte(tc.msg))
		if err != nil {
			m = nil // the walk alone decides
		}
		v, err := validated([]byte(tc.msg))
		if err != nil {
			// A name twice: readUpstreamMessage refuses it before.
			if !tc.stray {
				t.Errorf("%s: invalid, want it valid and without a stray state", tc.msg)
			}
			continue
		}
		if got := !onlyResultState([]byte(tc.msg), m) && strayState(v); got != tc.stray {
			t.Errorf("%s: stray %v, want %v", tc.msg, got, tc.stray)
		}
		if got, want := strayState(v), strayModel(v); got != want {
			t.Errorf("%s: the cutter's walk finds a stray state %v, jsontext's %v", tc.msg, got, want)
		}
	}
}

// TestHasStateBoundaries: the byte test finds every member name a
// parser reads as requestState (any case, '_' and '-' anywhere, an
// escape, ſ), and no longer passes over a string that merely contains the
// letters, such as a tool name: a request naming it took the parse path
// for nothing, which cost the gateway's p50 under load.
func TestHasStateBoundaries(t *testing.T) {
	for body, want := range map[string]bool{
		`{"requestState":"x"}`:                                true,
		`{"request_state":"x"}`:                               true,
		`{"__Request-STATE__":"x"}`:                           true,
		`{"r_e_q_u_e_s_t_s_t_a_t_e":1}`:                       true,
		`{"\u0072equestState":"x"}`:                           true,
		`{"requeſtState":"x"}`:                                true,
		`{"a":{"b":["requestState"]}}`:                        true, // a value spelled so: a parse, harmlessly
		`{"name":"test_input_required_result_request_state"}`: false,
		`{"requestStates":1}`:                                 false,
		`{"myrequestState":1}`:                                false,
		`{"request state":1}`:                                 false,
		`{"name":"x-requestState"}`:                           false,
	} {
		if got := hasState([]byte(body)); got != want {
			t.Errorf("hasState(%s) = %v, want %v", body, got, want)
		}
	}
}

// TestMemberBounds: a batch of more messages than maxBatch, or an object
// of more members than maxMembers, is refused before the gateway builds
// anything per member (a batch of a million {} cost it 600 MB).
func TestMemberBounds(t *testing.T) {
	batch := "[" + strings.Repeat(`{"jsonrpc":"2.0","method":"x"},`, maxBatch) + `{"jsonrpc":"2.0","method":"x"}]`
	if _, _, err := readRequest([]byte(batch)); err == nil {
		t.Fatal("a batch over the bound read")
	}
	if _, _, err := readRequest([]byte("[" + strings.Repeat(`{"jsonrpc":"2.0","method":"x"},`, maxBatch-1) + `{"jsonrpc":"2.0","method":"x"}]`)); err != nil {
		t.Fatalf("a batch at the bound: %v", err)
	}
	var b strings.Builder
	b.WriteString(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"requestState":"x"`)
	for i := range maxMembers {
		fmt.Fprintf(&b, `,"m%d":0`, i)
	}
	b.WriteString("}}")
	if _, _, err := readRequest([]byte(b.String())); err == nil {
		t.Fatal("params over the member bound read")
	}
	// An id is a string, a number or null, of at most 256 bytes: an
	// object id cost 45 times its bytes to canonicalize.
	for _, id := range []string{`{"a":0}`, `[1]`, `"` + strings.Repeat("x", 300) + `"`} {
		if _, _, err := readRequest([]byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"requestState":"x"}}`)); err == nil {
			t.Fatalf("id %.20s read", id)
		}
		if _, err := readUpstreamMessage([]byte(`{"jsonrpc":"2.0","id":`+id+`,"result":{"requestState":"x"}}`), nil); err == nil {
			t.Fatalf("upstream id %.20s read", id)
		}
	}
}
