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
	if _, err := Parse([]byte(doc)); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("nested duplicate: %v", err)
	}
	if _, err := Parse([]byte(strings.Repeat(" ", MaxSize+1))); err == nil {
		t.Fatal("oversized document accepted")
	}
}
