package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/seal"
)

// errOpen prefixes a rejected token's error, so the operator sees what the
// library said and what a client would be told.
var errOpen = errors.New("token rejected")

// bindingFlags are the binding of seal and open, for debugging.
type bindingFlags struct {
	method, target, principal, audience, session, args, context string
	// argsGiven: --args was given, even as '' (docs/FORMAT.md, "Argument
	// digest": a request without arguments binds the digest of {}).
	argsGiven func() bool
}

func (b *bindingFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&b.method, "method", "tools/call", "request method")
	f.StringVar(&b.target, "target", "", "tool name, prompt name or resource URI")
	f.StringVar(&b.principal, "principal", "", "authenticated caller")
	f.StringVar(&b.audience, "audience", "", "server or deployment")
	f.StringVar(&b.session, "session", "", "application session id")
	f.StringVar(&b.args, "args", "", "the request's arguments as received, a JSON object, digested; '' is a request without arguments (the digest of {}); without --args no argument digest is bound")
	f.StringVar(&b.context, "context", "", "caller context")
	b.argsGiven = func() bool { return f.Changed("args") }
}

func (b *bindingFlags) binding() (seal.Binding, error) {
	sb := seal.Binding{Method: b.method, Target: b.target, Principal: b.principal,
		Audience: b.audience, Session: b.session}
	if b.argsGiven() {
		d, err := seal.ArgsDigest([]byte(b.args))
		if err != nil {
			return sb, usageError{err}
		}
		sb.ArgsDigest = d
	}
	if b.context != "" {
		sb.Context = []byte(b.context)
	}
	return sb, nil
}

func (p *paths) sealer(cmd *cobra.Command) (*seal.Sealer, error) {
	snap, _, err := keyset.Load(cmd.Context(), p.keysetPath(), p.loadOptions())
	if err != nil {
		return nil, p.inFile(err)
	}
	ring, err := keyring.NewRing(snap)
	if err != nil {
		return nil, err
	}
	return seal.New(ring, nil)
}

func newSealCmd(p *paths) *cobra.Command {
	var bf bindingFlags
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "seal",
		Short: "Seal the payload on stdin with the keyset's primary key (for debugging)",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := bf.binding()
			if err != nil {
				return err
			}
			payload, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), seal.DefaultMaxTokenLen+1))
			if err != nil {
				return err
			}
			s, err := p.sealer(cmd)
			if err != nil {
				return err
			}
			tok, err := s.Seal(b, payload, ttl)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), tok)
			return nil
		},
	}
	bf.register(cmd)
	cmd.Flags().DurationVar(&ttl, "ttl", 0, "token lifetime (default 10m, capped at the keyset's max TTL)")
	return cmd
}

func newOpenCmd(p *paths) *cobra.Command {
	var bf bindingFlags
	var raw bool
	cmd := &cobra.Command{
		Use:   "open [--raw] TOKEN",
		Short: "Verify a token under a binding and print its payload and a newline (for debugging)",
		Long: `open verifies a token under the binding its flags give and prints the
payload followed by a newline, so that a shell prompt or the next line of
output does not run into it. --raw writes the payload's bytes exactly as
sealed, nothing added: for a payload that is not text, or to compare it
with a file.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			b, err := bf.binding()
			if err != nil {
				return err
			}
			s, err := p.sealer(cmd)
			if err != nil {
				return err
			}
			payload, err := s.Open(b, strings.TrimSpace(a[0]))
			if err != nil {
				return fmt.Errorf("%w: %v (a client is told %q)", errOpen, err, seal.Reason(err))
			}
			if !raw {
				payload = append(payload, '\n')
			}
			_, err = cmd.OutOrStdout().Write(payload)
			return err
		},
	}
	bf.register(cmd)
	cmd.Flags().BoolVar(&raw, "raw", false, "write the payload exactly, without the newline after it")
	return cmd
}
