package main

import (
	"encoding/base64"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/seal"
)

func newDemo() *cobra.Command {
	var alg string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Seal and open a state on an in-memory key, then try four attacks",
		Long: `Demo generates a key in memory (nothing is written, nothing leaves the
process), seals a request state bound to a tool call, opens it, and then
shows a tampered token, a token moved to another tool, a token replayed by
another user and an expired token, each rejected with its error.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := keyring.ParseAlgorithm(alg)
			if err != nil {
				return usageError{err}
			}
			return demo(cmd.OutOrStdout(), a)
		},
	}
	cmd.Flags().StringVar(&alg, "alg", "aead", "envelope: aead (encrypted) or mac (signed, readable)")
	return cmd
}

func demo(w io.Writer, alg keyring.Algorithm) error {
	ring, err := keyring.Generate(alg)
	if err != nil {
		return err
	}
	// A clock the demo can move forward, to show expiry without waiting.
	now := time.Now()
	s, err := seal.New(ring, &seal.Options{Now: func() time.Time { return now }})
	if err != nil {
		return err
	}
	args, err := seal.ArgsDigest([]byte(`{"from":"BER","to":"LIS"}`))
	if err != nil {
		return err
	}
	b := seal.Binding{
		Method: "tools/call", Target: "book_flight", Principal: "user-1234",
		Audience: "sealctl-demo", ArgsDigest: args,
	}
	state := []byte(`{"step":2,"fare":"F12"}`)
	tok, err := s.Seal(b, state, 5*time.Minute)
	if err != nil {
		return err
	}
	primary, err := ring.Current().Primary(now)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "key       %s (%s, in memory only)\n", keyring.FormatID(primary.ID), alg)
	fmt.Fprintf(w, "binding   %s %s, principal %s, arguments %s\n", b.Method, b.Target, b.Principal, `{"from":"BER","to":"LIS"}`)
	fmt.Fprintf(w, "state     %s\n", state)
	fmt.Fprintf(w, "token     %s (%d characters, lifetime 5m0s)\n", tok, len(tok))
	got, err := s.Open(b, tok)
	if err != nil {
		return fmt.Errorf("opening the demo token: %w", err)
	}
	fmt.Fprintf(w, "opened    %s\n\nattacks:\n", got)

	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return err
	}
	raw[len(raw)/2] ^= 1 // one bit in the middle of the envelope
	tampered := base64.RawURLEncoding.EncodeToString(raw)
	moved, other := b, b
	moved.Target = "cancel_flight"
	other.Principal = "user-9999"
	attacks := []struct {
		name string
		b    seal.Binding
		tok  string
		wait time.Duration
	}{
		{"one bit of the token flipped", b, tampered, 0},
		{"moved to tool cancel_flight", moved, tok, 0},
		{"replayed by user-9999", other, tok, 0},
		{"opened 6 minutes later", b, tok, 6 * time.Minute},
	}
	for _, at := range attacks {
		now = now.Add(at.wait)
		_, err := s.Open(at.b, at.tok)
		if err == nil {
			return fmt.Errorf("attack %q was not rejected", at.name)
		}
		fmt.Fprintf(w, "  %-30s rejected: %-8s (%v)\n", at.name, seal.Reason(err), err)
	}
	return nil
}
