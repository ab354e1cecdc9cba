package scan

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/stateseal/stateseal/scan/internal/stateform"
)

// An inputRequest is one entry of inputRequests.
type inputRequest struct {
	Method string `json:"method"`
	Params struct {
		Mode            string         `json:"mode"`
		RequestedSchema *schemaPropSet `json:"requestedSchema"`
	} `json:"params"`
}

type schemaPropSet struct {
	Properties map[string]schemaProp `json:"properties"`
}

type schemaProp struct {
	Type    string                            `json:"type"`
	Enum    []json.RawMessage                 `json:"enum"`
	OneOf   []struct{ Const json.RawMessage } `json:"oneOf"`
	Format  string                            `json:"format"`
	Minimum *float64                          `json:"minimum"`
	Default json.RawMessage                   `json:"default"`
}

// answers answers every input request: Config.Answers by key, else from
// its schema (elicitation), a fixed message (sampling) or no roots.
func (x *targetScan) answers(asks map[string]json.RawMessage) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for key, raw := range asks {
		if a, ok := x.c.Answers[key]; ok {
			out[key] = a
			continue
		}
		var ir inputRequest
		_ = json.Unmarshal(raw, &ir)
		out[key] = answer(&ir)
	}
	return out
}

func answer(ir *inputRequest) json.RawMessage {
	var v any
	switch ir.Method {
	case "elicitation/create":
		if ir.Params.Mode == "url" {
			v = map[string]any{"action": "accept"}
			break
		}
		content := map[string]any{}
		if s := ir.Params.RequestedSchema; s != nil {
			for name, p := range s.Properties {
				content[name] = p.value()
			}
		}
		v = map[string]any{"action": "accept", "content": content}
	case "sampling/createMessage":
		v = map[string]any{"role": "assistant", "content": map[string]any{"type": "text", "text": "statescan"}, "model": "statescan", "stopReason": "endTurn"}
	case "roots/list":
		v = map[string]any{"roots": []any{}}
	default:
		v = map[string]any{}
	}
	b, _ := json.Marshal(v)
	return b
}

// value is a valid answer for a property of an elicitation form.
func (p schemaProp) value() any {
	if len(p.Default) > 0 {
		return p.Default
	}
	if len(p.Enum) > 0 {
		return p.Enum[0]
	}
	if len(p.OneOf) > 0 && len(p.OneOf[0].Const) > 0 {
		return p.OneOf[0].Const
	}
	switch p.Type {
	case "boolean":
		return true
	case "number", "integer":
		if p.Minimum != nil {
			return *p.Minimum
		}
		return 1
	case "array":
		return []any{}
	}
	switch p.Format {
	case "email":
		return "statescan@example.com"
	case "uri":
		return "https://example.com/statescan"
	case "date":
		return "2026-07-28"
	case "date-time":
		return "2026-07-28T00:00:00Z"
	}
	return "statescan"
}

// decline is l's responses with every elicitation declined.
func decline(l *lastRound) (map[string]json.RawMessage, int) {
	out := map[string]json.RawMessage{}
	n := 0
	for k, v := range l.responses {
		out[k] = v
	}
	for k, raw := range l.asks {
		var ir inputRequest
		if json.Unmarshal(raw, &ir) == nil && ir.Method == "elicitation/create" {
			out[k] = json.RawMessage(`{"action":"decline"}`)
			n++
		}
	}
	return out, n
}

// readable says what a client can read of the state.
func readable(f stateform.Form) (Result, string) {
	texts := f.Text()
	if len(texts) == 0 {
		return Pass, "opaque: nothing in it decodes to text"
	}
	var parts []string
	for _, t := range texts {
		parts = append(parts, describe(t))
	}
	how := "as it is"
	if f.Decoded() {
		how = "after base64 decoding"
	}
	return Info, "readable " + how + ": " + strings.Join(parts, "; ")
}

// describe names a text without quoting it: JSON by its member names,
// text by its length and first characters.
func describe(t string) string {
	var v any
	if json.Unmarshal([]byte(t), &v) == nil {
		if m, ok := v.(map[string]any); ok {
			return "JSON object with members " + strings.Join(keys(m), ", ")
		}
		return fmt.Sprintf("JSON %T", v)
	}
	if len(t) > 12 {
		return fmt.Sprintf("text %q... (%d chars)", t[:8], len(t))
	}
	return fmt.Sprintf("text of %d chars", len(t))
}

func keys(m map[string]any) []string {
	var out []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			out = append(out, prefix+k)
			if sub, ok := v.(map[string]any); ok {
				walk(prefix+k+".", sub)
			}
		}
	}
	walk("", m)
	sort.Strings(out)
	return out
}

var (
	sensitiveName = regexp.MustCompile(`(?i)^(.*[_.-])?(account|acct|iban|bic|card|pan|cvv|ssn|email|e-?mail|phone|address|balance|amount|price|salary|income|score|credit|password|passwd|secret|token|api_?key|dob|birth(date)?|customer|user_?id|patient|diagnosis)([_.-].*)?$`)
	sensitiveText = []struct {
		kind string
		re   *regexp.Regexp
	}{
		{"an e-mail address", regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}`)},
		{"an IBAN", regexp.MustCompile(`\b[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}\b`)},
		{longNumber, regexp.MustCompile(`\b[0-9]{12,19}\b`)},
		{"a named secret", regexp.MustCompile(`(?i)\b(account|iban|card|ssn|email|balance|amount|salary|score|password|secret|token|api_?key)\s*[=:]`)},
	}
)

const longNumber = "a long number (account, card)"

// timestamp reports whether a run of digits reads as a Unix time of this
// century in seconds, milliseconds, microseconds or nanoseconds.
func timestamp(d string) bool {
	switch len(d) {
	case 10, 13, 16, 19:
		return d[0] == '1' || d[0] == '2'
	}
	return false
}

// secrets looks for data a client should not read in the readable state.
func secrets(f stateform.Form) (Result, string) {
	texts := f.Text()
	if len(texts) == 0 {
		return Pass, "opaque: nothing readable"
	}
	var found []string
	for _, t := range texts {
		var v any
		if json.Unmarshal([]byte(t), &v) == nil {
			if m, ok := v.(map[string]any); ok {
				for _, k := range keys(m) {
					last := k[strings.LastIndexByte(k, '.')+1:]
					if sensitiveName.MatchString(last) {
						found = append(found, "member "+k)
					}
				}
			}
		}
		for _, s := range sensitiveText {
			for _, m := range s.re.FindAllString(t, -1) {
				if s.kind == longNumber && timestamp(m) {
					continue // an issue or expiry time, in s, ms, µs or ns
				}
				found = append(found, s.kind)
				break
			}
		}
	}
	if len(found) == 0 {
		return Pass, "readable, but nothing that looks like identifiers, amounts, scores or account data"
	}
	return Fail, "readable by every client: " + strings.Join(dedupe(found), ", ") + " (values not shown)"
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
