package redis_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/internal/testservers"
	"github.com/stateseal/stateseal/stores"
	"github.com/stateseal/stateseal/stores/redis"
)

// TestPlaintextRefused: plain redis:// to a host that is not loopback is
// refused before any connection, for the store and for the client a
// guard uses, with every address counted (a Cluster's, the sentinels');
// the error says what to do and shows no password. insecure_plaintext=true
// says so in as many words.
func TestPlaintextRefused(t *testing.T) {
	ctx := context.Background()
	for _, raw := range []string{
		"redis://:hunter2@redis.internal:6379/0?key=k",
		"redis://:hunter2@10.0.0.7:6379/0?key=k",
		"redis://:hunter2@127.0.0.1:6379/0?key=k&addr=10.0.0.8:6379",              // a Cluster node
		"redis://:hunter2@127.0.0.1:26379/0?key=k&master=m&addr=sentinel-2:26379", // a sentinel
	} {
		_, err := stores.Open(ctx, raw)
		_, cerr := redis.NewClient(raw)
		for _, e := range []error{err, cerr} {
			if e == nil || !strings.Contains(e.Error(), "rediss://") || strings.Contains(e.Error(), "hunter2") {
				t.Errorf("%s: %v", raw, e)
			}
		}
	}
	for _, raw := range []string{
		"redis://redis.internal:6379/0?key=k&insecure_plaintext=true",
		"rediss://redis.internal:6379/0?key=k",
		"redis://localhost:6379/0?key=k", "redis://[::1]:6379/0?key=k",
	} {
		c, err := redis.NewClient(raw)
		if err != nil {
			t.Errorf("%s: %v", raw, err)
			continue
		}
		c.Close()
	}
	if _, err := redis.NewClient("redis://127.0.0.1:6379/0?ca=/x.pem"); err == nil || !strings.Contains(err.Error(), "rediss://") {
		t.Errorf("ca= on redis://: %v", err)
	}
	if _, err := redis.NewClient("rediss://127.0.0.1:6379/0?ca="); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("an empty ca=: %v", err)
	}
	if _, err := redis.NewClient("redis://:hunter2@redis.internal:6379/0?insecure_plaintext=maybe"); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("insecure_plaintext=maybe: %v", err)
	}
}

// TestTLSWithCA runs the store through a TLS proxy in front of a real
// Redis, with a certificate from a private CA: rediss://...?ca=FILE
// reads and writes; without ca= (the system's roots) or with another CA
// the handshake fails and nothing is read.
func TestTLSWithCA(t *testing.T) {
	ctx := context.Background()
	r := testservers.StartRedis(t)
	dir := t.TempDir()
	ca := newCA(t, dir, "ca.pem")
	newCA(t, dir, "other.pem") // a CA that signed nothing the proxy shows
	ln := tlsProxy(t, ca, r.Addr())
	base := "rediss://" + ln + "/0?key=" + newKey()
	s, err := stores.Open(ctx, base+"&ca="+filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	defer stores.Close(s)
	if _, err := s.Write(ctx, []byte(`{"a":1}`), ""); err != nil {
		t.Fatalf("write over TLS: %v", err)
	}
	if b, _, err := s.Read(ctx); err != nil || string(b) != `{"a":1}` {
		t.Fatalf("read over TLS: %q %v", b, err)
	}
	for _, raw := range []string{base + "&dial_timeout=2s", base + "&ca=" + filepath.Join(dir, "other.pem")} {
		o, err := stores.Open(ctx, raw)
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, _, err = o.Read(rctx)
		cancel()
		stores.Close(o)
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("%s: read %v; want a certificate error", raw, err)
		}
	}
}

// caCert is a CA and the server certificate it signed, for 127.0.0.1.
type caCert struct{ server tls.Certificate }

// newCA makes a CA, writes its certificate to dir/name, and returns a
// server certificate for 127.0.0.1 it signed.
func newCA(t *testing.T, dir, name string) *caCert {
	t.Helper()
	caKey := testkit.Must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER := testkit.Must(x509.CreateCertificate(rand.Reader, tmpl, tmpl, &caKey.PublicKey, caKey))
	caCrt := testkit.Must(x509.ParseCertificate(caDER))
	if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	key := testkit.Must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der := testkit.Must(x509.CreateCertificate(rand.Reader, leaf, caCrt, &key.PublicKey, caKey))
	return &caCert{server: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}}
}

// tlsProxy terminates TLS with c's server certificate on loopback and
// forwards each connection to the plain Redis at addr.
func tlsProxy(t *testing.T, c *caCert, addr string) string {
	t.Helper()
	ln := testkit.Must(tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{c.server}}))
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				up, err := net.Dial("tcp", addr)
				if err != nil {
					return
				}
				defer up.Close()
				go io.Copy(up, conn)
				io.Copy(conn, up)
			}()
		}
	}()
	return ln.Addr().String()
}
