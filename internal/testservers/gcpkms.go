package testservers

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"cloud.google.com/go/kms/apiv1/kmspb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// GCPKMS serves the Cloud KMS gRPC API (Encrypt and Decrypt) on loopback,
// for the real client library: Google ships no local server. It does what
// the service does that the backend relies on, for real: AES-256-GCM per
// key version, the additional authenticated data, CRC32C checksums both
// ways, ciphertexts that name their version so rotation keeps old ones
// decrypting, and InvalidArgument for a ciphertext that does not decrypt.
type GCPKMS struct {
	kmspb.UnimplementedKeyManagementServiceServer
	Addr string

	mu   sync.Mutex
	keys map[string]*gcpKey
	srv  *grpc.Server // the one serving now

	// CorruptResponses, when set, flips a byte of every ciphertext or
	// plaintext returned, without fixing its checksum.
	CorruptResponses atomic.Bool
	// Calls counts Encrypt and Decrypt requests.
	Calls atomic.Int64
}

type gcpKey struct {
	versions [][]byte     // AES-256 keys; the last is primary
	disabled map[int]bool // by version number, from 1
}

// StartGCPKMS starts the server; it stops when the test ends.
func StartGCPKMS(t testing.TB) *GCPKMS {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &GCPKMS{Addr: l.Addr().String(), keys: map[string]*gcpKey{}}
	g.serve(l)
	t.Cleanup(g.Stop)
	return g
}

func (g *GCPKMS) serve(l net.Listener) {
	srv := grpc.NewServer()
	kmspb.RegisterKeyManagementServiceServer(srv, g)
	g.mu.Lock()
	g.srv = srv
	g.mu.Unlock()
	go srv.Serve(l)
}

// Stop stops the server: every later call fails to connect, until Start.
func (g *GCPKMS) Stop() {
	g.mu.Lock()
	srv := g.srv
	g.mu.Unlock()
	srv.Stop()
}

// Start serves again on the same address, with the keys the server had.
func (g *GCPKMS) Start(t testing.TB) {
	t.Helper()
	l, err := net.Listen("tcp", g.Addr)
	if err != nil {
		t.Fatalf("restarting the Cloud KMS test server on %s: %v", g.Addr, err)
	}
	g.serve(l)
}

// NewKey creates a crypto key with one version and returns its name.
func (g *GCPKMS) NewKey(ring, id string) string {
	name := fmt.Sprintf("projects/stateseal-test/locations/global/keyRings/%s/cryptoKeys/%s", ring, id)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.keys[name] = &gcpKey{versions: [][]byte{randomKey()}}
	return name
}

// Rotate adds a version to the key and makes it primary.
func (g *GCPKMS) Rotate(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := g.keys[name]
	k.versions = append(k.versions, randomKey())
}

// Disable disables version v (from 1) of the key: Decrypt of a
// ciphertext it made fails, as the service answers (FailedPrecondition).
func (g *GCPKMS) Disable(name string, v int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := g.keys[name]
	if k.disabled == nil {
		k.disabled = map[int]bool{}
	}
	k.disabled[v] = true
}

func randomKey() []byte {
	b := make([]byte, 32)
	rand.Read(b)
	return b
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func checksum(b []byte) *wrapperspb.Int64Value {
	return wrapperspb.Int64(int64(crc32.Checksum(b, crcTable)))
}

// verify checks an optional request checksum: present and wrong is an
// error, as the service answers.
func verify(b []byte, c *wrapperspb.Int64Value, field string) (bool, error) {
	if c == nil {
		return false, nil
	}
	if c.Value != checksum(b).Value {
		return false, status.Errorf(codes.InvalidArgument, "%s_crc32c did not match", field)
	}
	return true, nil
}

func (g *GCPKMS) key(name string) (*gcpKey, string, error) {
	name, _, _ = strings.Cut(name, "/cryptoKeyVersions/")
	g.mu.Lock()
	defer g.mu.Unlock()
	k, ok := g.keys[name]
	if !ok {
		return nil, "", status.Errorf(codes.NotFound, "CryptoKey %s not found", name)
	}
	return k, name, nil
}

func (g *GCPKMS) corrupt(b []byte) []byte {
	if g.CorruptResponses.Load() && len(b) > 0 {
		b = append([]byte(nil), b...)
		b[len(b)/2] ^= 1
	}
	return b
}

// Encrypt seals with the primary version: version (4 bytes) ‖ nonce ‖ GCM.
func (g *GCPKMS) Encrypt(_ context.Context, r *kmspb.EncryptRequest) (*kmspb.EncryptResponse, error) {
	g.Calls.Add(1)
	k, name, err := g.key(r.Name)
	if err != nil {
		return nil, err
	}
	vp, err := verify(r.Plaintext, r.PlaintextCrc32C, "plaintext")
	if err != nil {
		return nil, err
	}
	va, err := verify(r.AdditionalAuthenticatedData, r.AdditionalAuthenticatedDataCrc32C, "additional_authenticated_data")
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	v := len(k.versions)
	aead := gcm(k.versions[v-1])
	g.mu.Unlock()
	out := binary.BigEndian.AppendUint32(nil, uint32(v))
	nonce := make([]byte, aead.NonceSize())
	rand.Read(nonce)
	out = aead.Seal(append(out, nonce...), nonce, r.Plaintext, r.AdditionalAuthenticatedData)
	return &kmspb.EncryptResponse{
		Name: fmt.Sprintf("%s/cryptoKeyVersions/%d", name, v), Ciphertext: g.corrupt(out), CiphertextCrc32C: checksum(out),
		VerifiedPlaintextCrc32C: vp, VerifiedAdditionalAuthenticatedDataCrc32C: va,
	}, nil
}

// Decrypt opens with the version the ciphertext names.
func (g *GCPKMS) Decrypt(_ context.Context, r *kmspb.DecryptRequest) (*kmspb.DecryptResponse, error) {
	g.Calls.Add(1)
	k, _, err := g.key(r.Name)
	if err != nil {
		return nil, err
	}
	if _, err := verify(r.Ciphertext, r.CiphertextCrc32C, "ciphertext"); err != nil {
		return nil, err
	}
	if _, err := verify(r.AdditionalAuthenticatedData, r.AdditionalAuthenticatedDataCrc32C, "additional_authenticated_data"); err != nil {
		return nil, err
	}
	bad := status.Error(codes.InvalidArgument, "Decryption failed: the ciphertext is invalid.")
	if len(r.Ciphertext) < 4+12+16 {
		return nil, bad
	}
	v := int(binary.BigEndian.Uint32(r.Ciphertext))
	g.mu.Lock()
	if v < 1 || v > len(k.versions) {
		g.mu.Unlock()
		return nil, bad
	}
	if k.disabled[v] {
		g.mu.Unlock()
		return nil, status.Errorf(codes.FailedPrecondition, "%s/cryptoKeyVersions/%d is not enabled, current state is: DISABLED.", r.Name, v)
	}
	aead := gcm(k.versions[v-1])
	g.mu.Unlock()
	pt, err := aead.Open(nil, r.Ciphertext[4:16], r.Ciphertext[16:], r.AdditionalAuthenticatedData)
	if err != nil {
		return nil, bad
	}
	return &kmspb.DecryptResponse{Plaintext: g.corrupt(pt), PlaintextCrc32C: checksum(pt)}, nil
}

func gcm(key []byte) cipher.AEAD {
	b, _ := aes.NewCipher(key)
	a, _ := cipher.NewGCM(b)
	return a
}
