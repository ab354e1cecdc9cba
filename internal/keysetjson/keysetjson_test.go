package keysetjson

import (
	"strings"
	"testing"
)

func TestParseKeyID(t *testing.T) {
	if id, err := ParseKeyID("0a1b2c3d"); err != nil || id != 0x0a1b2c3d {
		t.Fatalf("ParseKeyID = %x, %v", id, err)
	}
	for _, s := range []string{"", "0A1B2C3D", "a1b2c3d", "0a1b2c3d0", "0x1b2c3d", "zzzzzzzz", " a1b2c3d"} {
		if _, err := ParseKeyID(s); err == nil {
			t.Errorf("ParseKeyID(%q) accepted", s)
		}
	}
}

func TestParseWrapped(t *testing.T) {
	if b, err := ParseWrapped(FormatWrapped([]byte{1, 2, 3, 4})); err != nil || len(b) != 4 {
		t.Fatalf("round trip: %x, %v", b, err)
	}
	for _, s := range []string{"", "AQIDBA==", "AQID+A", "AQIDBA\n", "AQIDBB"} {
		if _, err := ParseWrapped(s); err == nil {
			t.Errorf("ParseWrapped(%q) accepted", s)
		}
	}
}

func TestParseRejectsDuplicatesAtAnyDepth(t *testing.T) {
	doc := `{"format":"` + Format + `","id":"ks","version":1,"kek":"local:k","policy":{"max_ttl_seconds":1,"max_ttl_seconds":2},"keys":[]}`
	if _, err := Parse([]byte(doc)); err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Fatalf("nested duplicate: %v", err)
	}
	// encoding/json would match "State" to the state field and keep the
	// last; Python and jq read "state", retired. Names match exactly here.
	key := `{"id":"0a1b2c3d","algorithm":"aead","state":"retired","State":"active","created":"2026-01-01T00:00:00Z","activation":"2026-01-01T00:00:00Z","wrapped":"AQ"}`
	doc = `{"format":"` + Format + `","id":"ks","version":1,"kek":"local:k","policy":{},"keys":[` + key + `],"auth":{"wrapped":"AQ","tag":"AQ"}}`
	if _, err := Parse([]byte(doc)); err == nil || !strings.Contains(err.Error(), "State") {
		t.Fatalf("case-variant duplicate: %v", err)
	}
	if _, err := Parse([]byte(strings.Replace(doc, `"state":"retired","State"`, `"State"`, 1))); err == nil {
		t.Fatal(`"State" alone read as "state"`)
	}
	if _, err := Parse([]byte(strings.Replace(doc, `"state":"retired","State":"active",`, `"state":"retired",`, 1))); err != nil {
		t.Fatalf("the same document without the variant: %v", err)
	}
	if _, err := Parse([]byte(strings.Repeat(" ", MaxSize+1))); err == nil {
		t.Fatal("oversized document accepted")
	}
}

func TestParseTime(t *testing.T) {
	for _, s := range []string{"1970-01-01T00:00:00Z", "2026-07-28T12:00:00Z", "9999-12-31T23:59:59Z"} {
		if tm, err := ParseTime(s); err != nil || FormatTime(tm) != s {
			t.Errorf("ParseTime(%q) = %v, %v", s, tm, err)
		}
	}
	// Before 1970 (the authentication reads times as unsigned Unix
	// seconds), Go's zero time among them, and every other form.
	for _, s := range []string{"1969-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "0000-01-01T00:00:00Z",
		"2026-07-28T12:00:00.000Z", "2026-07-28T12:00:00+00:00", "2026-07-28T12:00:00z", "2026-07-28 12:00:00Z",
		"2026-02-30T12:00:00Z", "2026-06-30T23:59:60Z", "2026-07-28T24:00:00Z", "+2026-07-28T12:00:00Z", ""} {
		if tm, err := ParseTime(s); err == nil {
			t.Errorf("ParseTime(%q) = %v", s, tm)
		}
	}
}
