// Package keysetjson reads and writes the JSON form of a keyset document,
// strictly: unknown fields, unknown formats, trailing data and malformed
// values are errors. docs/KEYSET.md is its specification. Package keyring
// gives the document its meaning.
package keysetjson

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Format is the value of the "format" member of every version-4 keyset.
// Version 1 had no authentication of its metadata and is not read;
// version 2 had no freshness and took its KEK's transport settings from
// the document; version 3 had no history and no record of retired keys.
// Versions 2 and 3 are read only to upgrade them (FormatV2, FormatV3).
const Format = "stateseal-keyset-v4"

// FormatV3 and FormatV2 are the previous formats, read only by an upgrade.
const (
	FormatV3 = "stateseal-keyset-v3"
	FormatV2 = "stateseal-keyset-v2"
)

// MaxHistory bounds Doc.History: the links to the versions before a
// document that a loader can check it descends from.
const MaxHistory = 32

// WrapDomain starts the associated data of every wrapped key. It keeps the
// value of format version 2, so an upgrade rewrites no wrapped key.
const WrapDomain = "stateseal-keyset-v2"

// Doc is a keyset document as it is stored.
type Doc struct {
	Format  string `json:"format"`
	ID      string `json:"id"`
	Version uint64 `json:"version"`
	KEK     string `json:"kek"`
	// Expires is present when Policy.Freshness is not zero: a time
	// (TimeLayout) after which the document no longer loads until it is
	// refreshed.
	Expires string `json:"expires,omitempty"`
	Policy  Policy `json:"policy"`
	Keys    []Key  `json:"keys"`
	// History links the document to the ones it was edited from, newest
	// first: the version and tag of each (format 4).
	History []Link `json:"history,omitempty"`
	// RetiredKeys lists, ascending, the id of every key ever retired in
	// this keyset, listed retired in Keys or pruned since (format 4).
	RetiredKeys []string `json:"retired_keys,omitempty"`
	Auth        Auth     `json:"auth"`
}

// A Link names an earlier document: its version and its auth tag
// (unpadded base64url of 32 bytes).
type Link struct {
	Version uint64 `json:"version"`
	Tag     string `json:"tag"`
}

// Policy values are whole seconds.
type Policy struct {
	PropagationDelay int64 `json:"propagation_delay_seconds"`
	MaxTTL           int64 `json:"max_ttl_seconds"`
	Skew             int64 `json:"skew_seconds"`
	RotationInterval int64 `json:"rotation_interval_seconds"`
	Freshness        int64 `json:"freshness_seconds"`
}

// Key is one key entry. ID is 8 lower-case hex digits; Wrapped is unpadded
// base64url.
type Key struct {
	ID         string `json:"id"`
	Algorithm  string `json:"algorithm"`
	State      string `json:"state"`
	Created    string `json:"created"`
	Activation string `json:"activation"`
	Wrapped    string `json:"wrapped"`
}

// TimeLayout is the one form of a time in a keyset: UTC, whole seconds,
// "Z". Fractions and offsets are refused, since the authentication covers
// whole seconds and every reader must see the same instant.
const TimeLayout = "2006-01-02T15:04:05Z"

// ParseTime reads a time in TimeLayout, strictly, from 1970 on: the
// authentication reads a time as unsigned Unix seconds
// (docs/KEYSET-FORMAT.md).
func ParseTime(s string) (time.Time, error) {
	t, err := time.Parse(TimeLayout, s)
	if err != nil || t.Format(TimeLayout) != s || t.Unix() < 0 {
		return time.Time{}, fmt.Errorf("time %q is not UTC whole seconds (%s) from 1970 on", s, TimeLayout)
	}
	return t, nil
}

// FormatTime writes t in TimeLayout.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

// Auth authenticates the document: Tag is HMAC-SHA256 under the key that
// Wrapped holds, wrapped by the keyset's KEK. Both are unpadded base64url.
type Auth struct {
	Wrapped string `json:"wrapped"`
	Tag     string `json:"tag"`
}

// MaxSize bounds a keyset document. A keyset holds a handful of keys; a
// larger file is a mistake or an attack, and is not read. The stores
// (stores.MaxSize is this bound) refuse it before they transfer a document.
const MaxSize = 1 << 20

// ErrFormatV2 reports a keyset in a previous format (2 or 3).
var ErrFormatV2 = errors.New("keyset is in a previous format, which this version loads only to upgrade it")

// Parse decodes a document strictly: member names match exactly (not case
// -insensitively, as encoding/json would), and a member given twice,
// unknown members, invalid UTF-8 and data after the object are errors, so
// that every JSON reader of the file sees what stateseal sees. A document
// in format version 2 or 3 is refused with an error matching ErrFormatV2.
func Parse(data []byte) (*Doc, error) {
	return parse(data, Format)
}

// ParseOld decodes a document in format version 2 or 3, for an upgrade.
func ParseOld(data []byte) (*Doc, error) {
	d, err := parse(data, FormatV3)
	if errors.Is(err, ErrFormatV2) {
		d, err = parse(data, FormatV2)
		if err == nil && (d.Expires != "" || d.Policy.Freshness != 0) {
			return nil, errors.New("keyset in format " + FormatV2 + " has members of a later format")
		}
	}
	if err != nil {
		return nil, err
	}
	if d.History != nil || d.RetiredKeys != nil {
		return nil, fmt.Errorf("keyset in format %s has members of a later format", d.Format)
	}
	return d, nil
}

func parse(data []byte, format string) (*Doc, error) {
	if len(data) > MaxSize {
		return nil, fmt.Errorf("keyset is %d bytes, over the %d-byte limit", len(data), MaxSize)
	}
	// Peek at the format first, so a future version gets a clear error
	// rather than a complaint about its new fields.
	var head struct {
		Format *string `json:"format"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("keyset is not valid JSON: %w", err)
	}
	switch {
	case head.Format == nil:
		return nil, errors.New(`keyset has no "format" member`)
	case *head.Format == format:
	case *head.Format == FormatV2 || *head.Format == FormatV3:
		return nil, fmt.Errorf("%w (%s): run 'sealctl upgrade' once, with the keyset's KEK", ErrFormatV2, *head.Format)
	default:
		return nil, fmt.Errorf("keyset format %q is not supported (this version reads %q; create a new keyset with sealctl init)", *head.Format, format)
	}
	var d Doc
	if err := json.Unmarshal(data, &d, json.RejectUnknownMembers(true)); err != nil {
		return nil, fmt.Errorf("keyset: %w", err)
	}
	return &d, nil
}

// Marshal encodes a document, indented, with a final newline.
func Marshal(d *Doc) ([]byte, error) {
	b, err := json.Marshal(d, jsontext.WithIndent("  "), json.Deterministic(true))
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// ParseKeyID parses 8 lower-case hex digits.
func ParseKeyID(s string) (uint32, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 4 || hex.EncodeToString(b) != s {
		return 0, fmt.Errorf("key id %q is not 8 lower-case hex digits", s)
	}
	return binary.BigEndian.Uint32(b), nil
}

// ParseWrapped decodes a wrapped key or a tag: unpadded base64url, with no
// line breaks (which encoding/base64 would skip).
func ParseWrapped(s string) ([]byte, error) {
	if strings.ContainsAny(s, "\r\n") {
		return nil, errors.New("wrapped key is not unpadded base64url")
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) == 0 {
		return nil, errors.New("wrapped key is not unpadded base64url")
	}
	if len(b) > MaxWrapped {
		return nil, fmt.Errorf("wrapped key is %d bytes, over the %d-byte limit", len(b), MaxWrapped)
	}
	return b, nil
}

// MaxWrapped bounds a wrapped key: every KMS wraps 32 bytes in a few
// hundred; a larger blob is garbage that would only cost a KMS call (AWS
// KMS answers ValidationException past 6 KiB) at every poll.
const MaxWrapped = 2048

// FormatWrapped encodes a wrapped key or a tag.
func FormatWrapped(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
