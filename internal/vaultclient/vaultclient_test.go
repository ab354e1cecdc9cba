package vaultclient

import (
	"context"
	"strings"
	"testing"
)

// TestPlainHTTPRefused: the token that reads the keyset also unwraps its
// keys through transit, so it never crosses a network in the clear unless
// the operator says the network is trusted. Refused before any request.
func TestPlainHTTPRefused(t *testing.T) {
	for addr, ok := range map[string]bool{
		"https://vault.example:8200": true,
		"http://127.0.0.1:8200":      true,
		"http://[::1]:8200":          true,
		"http://localhost:8200":      true,
		"http://10.0.0.5:8200":       false,
		"http://vault.internal:8200": false,
		"HTTP://192.0.2.2:8200":      false,
		"http://127.0.0.1.nip.io:80": false,
	} {
		if err := CheckAddress(addr); (err == nil) != ok {
			t.Errorf("CheckAddress(%s) = %v", addr, err)
		}
	}
	t.Setenv("VAULT_ADDR", "http://192.0.2.2:8200")
	t.Setenv("VAULT_TOKEN", "hvs.test")
	if _, err := newShared(context.Background(), nil); err == nil || !strings.Contains(err.Error(), AllowHTTPEnv) {
		t.Fatalf("a session on plain http to another host: %v", err)
	}
	t.Setenv(AllowHTTPEnv, "1")
	if err := CheckAddress("http://10.0.0.5:8200"); err != nil {
		t.Fatalf("with %s=1: %v", AllowHTTPEnv, err)
	}
}
