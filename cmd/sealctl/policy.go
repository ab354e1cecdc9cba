package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/rotation"
)

func newPolicy(p *paths) *cobra.Command {
	var force bool
	var pd, ttl, skew, ri, fresh time.Duration
	cmd := &cobra.Command{
		Use:   "policy [--propagation-delay D] [--max-ttl D] [--skew D] [--rotation-interval D] [--freshness D] [--force]",
		Short: "Show the keyset's policy, or change it (printing old -> new)",
		Long: `policy changes the timing a keyset's fleet shares, in one authenticated,
compare-and-swap edit, and prints each value old -> new. Without flags it
verifies the keyset and prints its policy.

Lowering --max-ttl or --skew is refused without --force: tokens sealed
before every instance has loaded the change may carry a longer lifetime,
or rely on the wider skew, and instances that loaded it refuse them until
they would have expired; the refusal names that moment. Values must make a
valid policy (the rotation interval longer than the propagation delay, the
skew at most 10m, the freshness 0 or between 1h and 366 days).`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			var pc rotation.PolicyChange
			for _, c := range []struct {
				name string
				v    *time.Duration
				dst  **time.Duration
			}{{"propagation-delay", &pd, &pc.PropagationDelay}, {"max-ttl", &ttl, &pc.MaxTTL}, {"skew", &skew, &pc.Skew},
				{"rotation-interval", &ri, &pc.RotationInterval}, {"freshness", &fresh, &pc.Freshness}} {
				if f.Changed(c.name) {
					*c.dst = c.v
				}
			}
			w := cmd.OutOrStdout()
			if pc == (rotation.PolicyChange{}) {
				if force {
					return usageError{fmt.Errorf("--force goes with a change of --max-ttl or --skew")}
				}
				ks, err := p.verified(cmd.Context())
				if err != nil {
					return err
				}
				recordSeen(ks)
				fmt.Fprintf(w, "policy of keyset %s, version %d:\n", ks.ID, ks.Version)
				printPolicy(w, ks.Policy, ks.Policy)
				return nil
			}
			pc.Force = force
			res, err := p.edit(cmd.Context(), func() (rotation.Result, error) {
				return rotation.SetPolicy(cmd.Context(), p.keysetPath(), &pc, p.options())
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "policy of keyset %s, version %d:\n", res.Keyset.ID, res.Keyset.Version)
			printPolicy(w, res.OldPolicy, res.Keyset.Policy)
			warn(cmd.ErrOrStderr(), res)
			return nil
		},
	}
	f := cmd.Flags()
	f.DurationVar(&pd, "propagation-delay", 0, "how long a new key waits before it seals")
	f.DurationVar(&ttl, "max-ttl", 0, "longest token lifetime (lowering it needs --force)")
	f.DurationVar(&skew, "skew", 0, "clock skew tolerated between instances (lowering it needs --force)")
	f.DurationVar(&ri, "rotation-interval", 0, "scheduled rotation interval (0: off)")
	f.DurationVar(&fresh, "freshness", 0, "how long a version loads unless rewritten (0: off)")
	f.BoolVar(&force, "force", false, "lower the max TTL or skew even though tokens in flight are then refused")
	return cmd
}

// printPolicy prints each value of the policy, old -> new where it changed.
func printPolicy(w io.Writer, old, p keyring.Policy) {
	for _, r := range []struct {
		name   string
		before time.Duration
		after  time.Duration
	}{{"propagation delay", old.PropagationDelay, p.PropagationDelay}, {"max TTL", old.MaxTTL, p.MaxTTL}, {"skew", old.Skew, p.Skew},
		{"rotation interval", old.RotationInterval, p.RotationInterval}, {"freshness", old.Freshness, p.Freshness}} {
		if r.before == r.after {
			fmt.Fprintf(w, "  %-18s %s\n", r.name, r.after)
			continue
		}
		fmt.Fprintf(w, "  %-18s %s -> %s\n", r.name, r.before, r.after)
	}
}
