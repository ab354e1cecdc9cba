package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/stateseal/stateseal/internal/redact"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/rotation"
	"github.com/stateseal/stateseal/stores"
)

type keyRow struct {
	ID          string     `json:"id"`
	Algorithm   string     `json:"algorithm"`
	State       string     `json:"state"`
	Role        string     `json:"role"` // primary, pending, superseded, or ""
	Created     time.Time  `json:"created"`
	Activation  time.Time  `json:"activation"`
	RetireAfter *time.Time `json:"retire_after,omitempty"`
}

type listOutput struct {
	Keyset  string `json:"keyset"`
	Version uint64 `json:"version"`
	// Tag is the document's tag (keyset.Keyset.TagText), as instances
	// show it in /healthz: the same version with another tag is another
	// document (a fork, or a split view).
	Tag    string   `json:"tag"`
	KEK    string   `json:"kek"`
	Policy policyJS `json:"policy"`
	Keys   []keyRow `json:"keys"`
	// Follows is the version this one was edited from (0 for version 1);
	// RetiredKeys every key ever retired, pruned ones included.
	Follows     uint64   `json:"follows,omitempty"`
	RetiredKeys []string `json:"retired_keys,omitempty"`
}

type policyJS struct {
	PropagationDelay string `json:"propagation_delay"`
	MaxTTL           string `json:"max_ttl"`
	Skew             string `json:"skew"`
	RotationInterval string `json:"rotation_interval"`
}

func newList(p *paths) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the keyset's keys (no key is unwrapped; a copy older than, or forked from, the version this operator saw is refused)",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ks, err := p.readKeyset(cmd.Context())
			if err != nil {
				return err
			}
			// A copy below or beside the record (a rollback, a fork) is not
			// listed: its primary may be a key retired since, which the
			// listing would show as current.
			if err := checkSeen(ks); err != nil {
				return p.inFile(fmt.Errorf("%w (not listed: its keys and primary are not the keyset's current ones)", err))
			}
			out := describe(ks, time.Now())
			if asJSON {
				return printJSON(cmd.OutOrStdout(), out)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintf(w, "keyset %s, version %d, tag %s, KEK %s (not verified: 'sealctl verify' checks it under the KEK)\n", shown(out.Keyset), out.Version, out.Tag, shown(out.KEK))
			fmt.Fprintf(w, "policy: propagation delay %s, max TTL %s, skew %s, rotation interval %s\n",
				out.Policy.PropagationDelay, out.Policy.MaxTTL, out.Policy.Skew, out.Policy.RotationInterval)
			if out.Follows != 0 {
				fmt.Fprintf(w, "edited from version %d\n", out.Follows)
			}
			if len(out.RetiredKeys) > 0 {
				fmt.Fprintf(w, "retired for good (listed or pruned): %s\n", strings.Join(out.RetiredKeys, " "))
			}
			fmt.Fprintln(w)
			fmt.Fprintln(w, "ID\tALG\tSTATE\tROLE\tCREATED\tACTIVATION\tRETIRE AFTER")
			for _, r := range out.Keys {
				ra := "-"
				if r.RetireAfter != nil {
					ra = r.RetireAfter.Format(time.RFC3339)
				}
				role := r.Role
				if role == "" {
					role = "-"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Algorithm, r.State, role,
					r.Created.Format(time.RFC3339), r.Activation.Format(time.RFC3339), ra)
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func describe(ks *keyset.Keyset, now time.Time) listOutput {
	out := listOutput{Keyset: ks.ID, Version: ks.Version, Tag: ks.TagText(), KEK: redact.URL(ks.KEK), Policy: policyJS{
		PropagationDelay: ks.Policy.PropagationDelay.String(), MaxTTL: ks.Policy.MaxTTL.String(),
		Skew: ks.Policy.Skew.String(), RotationInterval: ks.Policy.RotationInterval.String(),
	}, Keys: []keyRow{}}
	if len(ks.History) > 0 {
		out.Follows = ks.History[0].Version
	}
	for _, id := range ks.RetiredKeys {
		out.RetiredKeys = append(out.RetiredKeys, keyring.FormatID(id))
	}
	primary, _ := ks.Primary(now)
	for _, k := range ks.Keys {
		r := keyRow{ID: keyring.FormatID(k.ID), Algorithm: k.Algorithm.String(), State: k.State.String(),
			Created: k.Created, Activation: k.Activation}
		switch {
		case primary != nil && k.ID == primary.ID:
			r.Role = "primary"
		case k.State == keyring.Active && k.Activation.After(now):
			r.Role = "pending"
		case k.State != keyring.Retired:
			r.Role = "superseded"
		}
		if at, ok := rotation.SafeToRetire(ks, k.ID); ok && k.State != keyring.Retired {
			r.RetireAfter = &at
		}
		out.Keys = append(out.Keys, r)
	}
	return out
}

func newVerify(p *paths) *cobra.Command {
	return &cobra.Command{
		Use:   "verify",
		Short: "Unwrap every key through the KEK and report each",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := p.keysetPath()
			ks, err := p.readKeyset(cmd.Context())
			if err != nil {
				return err
			}
			if err := keyset.Check(ks, path, p.loadOptions()); err != nil {
				return p.inFile(rollbackFirst(ks, err))
			}
			kek, err := keyset.OpenKEK(cmd.Context(), path, ks.KEK, p.loadOptions())
			if err != nil {
				return p.inFile(rollbackFirst(ks, err))
			}
			if c, ok := kek.(io.Closer); ok {
				defer c.Close()
			}
			w := cmd.OutOrStdout()
			if err := ks.Verify(cmd.Context(), kek); err != nil {
				return p.inFile(seenRollback(ks, err))
			}
			if err := checkSeen(ks); err != nil {
				return p.inFile(err)
			}
			fmt.Fprintf(w, "keyset %s version %d tag %s: metadata authenticates under its KEK\n", shown(ks.ID), ks.Version, ks.TagText())
			failed := 0
			for _, sk := range ks.Keys {
				k, err := ks.UnwrapKey(cmd.Context(), kek, sk)
				if err != nil {
					failed++
					fmt.Fprintf(w, "key %s  %-4s  %-12s  FAILED: %s\n", keyring.FormatID(sk.ID), sk.Algorithm, sk.State, terminalSafe(err.Error()))
					continue
				}
				k.Zero()
				fmt.Fprintf(w, "key %s  %-4s  %-12s  ok\n", keyring.FormatID(sk.ID), sk.Algorithm, sk.State)
			}
			if _, _, err := keyset.Load(cmd.Context(), path, p.loadOptions()); err != nil && failed == 0 {
				return p.inFile(err)
			}
			if failed > 0 {
				return fmt.Errorf("%s: %d of %d keys do not unwrap", stores.Redact(path), failed, len(ks.Keys))
			}
			recordSeen(ks)
			fmt.Fprintf(w, "keyset %s version %d tag %s: all %d keys unwrap\n", shown(ks.ID), ks.Version, ks.TagText(), len(ks.Keys))
			return nil
		},
	}
}
