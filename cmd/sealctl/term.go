package main

import (
	"strconv"
	"strings"
	"unicode"
)

// shown is a value read from the store before it is authenticated (a
// keyset id, a KEK name) as sealctl prints it: as it is if every rune is
// printable, else quoted with Go's escapes, so that a store writer cannot
// send the operator's terminal escape sequences or forge output lines.
func shown(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// terminalSafe escapes every control or unprintable rune of msg but tabs,
// line breaks too (an error is one line, which a value cannot end and
// follow with a forged one): error messages quote values from the store,
// which no one has authenticated when the error is about them.
func terminalSafe(msg string) string {
	var b strings.Builder
	for _, r := range msg {
		if r == '\t' || unicode.IsPrint(r) {
			b.WriteRune(r)
			continue
		}
		q := strconv.QuoteRune(r)
		b.WriteString(q[1 : len(q)-1])
	}
	return b.String()
}
