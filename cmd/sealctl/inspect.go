package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/seal"
)

func newInspect() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect TOKEN",
		Short: "Print a token's header, without any key (- reads the token from stdin)",
		Long: `Inspect decodes a token's header: version, key id, issue and expiry
times, and sizes. It uses no key and verifies nothing: every field it prints
is whatever the token's sender chose.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			tok := a[0]
			if tok == "-" {
				b, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), seal.DefaultMaxTokenLen+2))
				if err != nil {
					return err
				}
				tok = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
			}
			h, err := seal.Inspect(tok)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), headerJSON(h))
			}
			printHeader(cmd.OutOrStdout(), h)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

type inspectOutput struct {
	Version       int    `json:"version"`
	Algorithm     string `json:"algorithm"`
	KeyID         string `json:"key_id"`
	IssuedAt      string `json:"issued_at"` // RFC 3339; the year may exceed 9999
	ExpiresAt     string `json:"expires_at"`
	IssuedAtUnix  int64  `json:"issued_at_unix"`
	ExpiresAtUnix int64  `json:"expires_at_unix"`
	TokenLength   int    `json:"token_length"`
	PayloadLength int    `json:"payload_length"`
	Verified      bool   `json:"verified"`
}

func headerJSON(h seal.Header) inspectOutput {
	return inspectOutput{
		Version: int(h.Version), Algorithm: h.Algorithm.String(), KeyID: keyring.FormatID(h.KeyID),
		// time.Time's JSON encoding fails past the year 9999, which a
		// header's 40-bit issued-at reaches; Format does not.
		IssuedAt: h.IssuedAt.Format(time.RFC3339), ExpiresAt: h.Expiry.Format(time.RFC3339),
		IssuedAtUnix: h.IssuedAt.Unix(), ExpiresAtUnix: h.Expiry.Unix(),
		TokenLength: h.TokenLen, PayloadLength: h.PayloadLen,
	}
}

func printHeader(w io.Writer, h seal.Header) {
	payload := "readable by the client"
	if h.Algorithm == keyring.AEAD {
		payload = "encrypted"
	}
	fmt.Fprintf(w, "version     %d (v1 %s)\n", h.Version, h.Algorithm)
	fmt.Fprintf(w, "key id      %s\n", keyring.FormatID(h.KeyID))
	fmt.Fprintf(w, "issued at   %s\n", h.IssuedAt.Format(time.RFC3339))
	fmt.Fprintf(w, "expires at  %s (lifetime %v)\n", h.Expiry.Format(time.RFC3339), h.Expiry.Sub(h.IssuedAt))
	fmt.Fprintf(w, "token       %d characters\n", h.TokenLen)
	fmt.Fprintf(w, "payload     %d bytes, %s\n", h.PayloadLen, payload)
	fmt.Fprintln(w, "verified    no: inspect uses no key; every field is the sender's claim")
}

func printJSON(w io.Writer, v any) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(v)
}
