package main

import (
	"io"
	"strings"
	"testing"
)

// TestFleetMemoryRefused: single use with the default in-memory guard and
// a keyset in a shared store (how a fleet of gateways is configured) is
// refused at start, naming -replay and no secret of the store URL; an
// explicit -replay memory (one gateway on a shared keyset), a Redis
// guard, a keyset file and several upstreams behind one gateway are not.
func TestFleetMemoryRefused(t *testing.T) {
	base := []string{"-upstream", "http://127.0.0.1:1,http://127.0.0.1:2", "-audience", "a", "-principal", "anonymous", "-single-use", "pay"}
	for _, ks := range []string{"redis://:secret@127.0.0.1:6379/0?key=k", "vault-kv://127.0.0.1:8200/secret/k?token=s3"} {
		_, err := parseConfig(append(base, "-keyset", ks, "-kek", "local://env/K"), func(string) string { return "" }, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "-replay redis://") || strings.Contains(err.Error(), "secret@") || strings.Contains(err.Error(), "s3") {
			t.Fatalf("-keyset %s with the memory guard: %v", ks, err)
		}
	}
	for _, extra := range [][]string{
		{"-keyset", "redis://127.0.0.1:6379/0?key=k", "-kek", "local://env/K", "-replay", "memory"},
		{"-keyset", "redis://127.0.0.1:6379/0?key=k", "-kek", "local://env/K", "-replay", "redis://127.0.0.1:6379/1"},
		{"-keyset", "/etc/sealgate/keyset.json"},
		{},
	} {
		if _, err := parseConfig(append(base, extra...), func(string) string { return "" }, io.Discard); err != nil {
			t.Fatalf("%q: %v", extra, err)
		}
	}
}

// TestJWKSURLPlainHTTP: a plain-http -jwks-url is refused unless it is on
// loopback or -jwks-insecure-http says so.
func TestJWKSURLPlainHTTP(t *testing.T) {
	base := []string{"-upstream", "http://127.0.0.1:1", "-audience", "a", "-principal", "jwt", "-jwt-issuer", "i", "-jwt-audience", "a"}
	for url, ok := range map[string]bool{
		"https://id.example.com/jwks":     true,
		"http://127.0.0.1:8080/jwks":      true,
		"http://localhost/jwks":           true,
		"http://[::1]:9/jwks":             true,
		"http://id.example.com/jwks":      false,
		"ftp://id.example.com/jwks":       false,
		"http://10.0.0.1/.well-known/jwk": false,
	} {
		_, err := parseConfig(append(base, "-jwks-url", url), func(string) string { return "" }, io.Discard)
		if (err == nil) != ok {
			t.Errorf("-jwks-url %s: %v", url, err)
		}
	}
	if _, err := parseConfig(append(base, "-jwks-url", "http://id.example.com/jwks", "-jwks-insecure-http"), func(string) string { return "" }, io.Discard); err != nil {
		t.Errorf("-jwks-insecure-http: %v", err)
	}
}
