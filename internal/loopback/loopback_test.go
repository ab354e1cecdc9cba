package loopback

import "testing"

func TestHost(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LocalHost": true, "127.0.0.1": true, "127.8.9.10": true, "::1": true, "::ffff:127.0.0.1": true,
		"": false, "10.0.0.1": false, "redis": false, "localhost.example.com": false, "127.0.0.1.nip.io": false,
		"0.0.0.0": false, "::": false, "::ffff:10.0.0.1": false, "[::1]": false,
	} {
		if got := Host(host); got != want {
			t.Errorf("Host(%q) = %v, want %v", host, got, want)
		}
	}
	for addr, want := range map[string]bool{"127.0.0.1:6379": true, "[::1]:6379": true, "localhost:1": true,
		"redis:6379": false, "127.0.0.1": false, "10.1.1.1:6379": false} {
		if got := Addr(addr); got != want {
			t.Errorf("Addr(%q) = %v, want %v", addr, got, want)
		}
	}
}
