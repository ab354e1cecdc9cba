package main

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/keysetjson"
	"github.com/stateseal/stateseal/internal/localkek"
	"github.com/stateseal/stateseal/internal/redact"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/rotation"
	"github.com/stateseal/stateseal/stores"
)

// quiet drops the library's logs: the CLI reports for itself.
var quiet = slog.New(slog.DiscardHandler)

func newInit(p *paths) *cobra.Command {
	var alg string
	pol := keyring.DefaultPolicy()
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Create a keyset with one key, and a local KEK file if it names one that does not exist",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := keyring.ParseAlgorithm(alg)
			if err != nil {
				return usageError{err}
			}
			path, kek := p.keysetPath(), p.kekURL()
			if kek == "" && stores.IsURL(path) && !strings.HasPrefix(path, "file://") {
				return usageError{fmt.Errorf("a keyset in a store needs --kek (or $%s): an absolute local:/path, local://env/NAME, or a KMS URL", envKEK)}
			}
			if kek == "" {
				kek = defaultKEK
			}
			if err := pol.Validate(); err != nil {
				return usageError{err}
			}
			if _, err := os.Stat(path); err == nil && !stores.IsURL(path) {
				return fmt.Errorf("%s already exists; not overwriting it", path)
			}
			lk, err := createLocalKEK(kek, path)
			if err != nil {
				return err
			}
			res, err := rotation.Init(cmd.Context(), path, kek, a, pol, &rotation.Options{Logger: quiet})
			if err == nil {
				recordSeen(res.Keyset)
			}
			if err != nil {
				lk.undo() // a failed init leaves nothing behind
				return p.inFile(err)
			}
			if err := lk.check(); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			lk.report(w)
			fmt.Fprintf(w, "created keyset %s in %s: key %s (%s), KEK %s\n", res.Keyset.ID, stores.Redact(path), keyring.FormatID(res.Key), a, redact.URL(kek))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&alg, "alg", "aead", "algorithm of the first key: aead or mac")
	f.DurationVar(&pol.PropagationDelay, "propagation-delay", pol.PropagationDelay, "how long a new key waits before it seals")
	f.DurationVar(&pol.MaxTTL, "max-ttl", pol.MaxTTL, "longest token lifetime")
	f.DurationVar(&pol.Skew, "skew", pol.Skew, "clock skew tolerated between instances")
	f.DurationVar(&pol.RotationInterval, "rotation-interval", pol.RotationInterval, "scheduled rotation interval (0: off)")
	f.DurationVar(&pol.Freshness, "freshness", pol.Freshness, "how long a version loads unless rewritten: the bound on a store rollback (0: off)")
	return cmd
}

// A localKEK is the local KEK file a command creates, or uses if it
// exists already.
type localKEK struct {
	path    string
	created bool
	sum     [32]byte // of what was written, if created
}

// createLocalKEK writes a new local KEK file if kek names one that does
// not exist. A relative path resolves where the keyset's loader resolves
// it: against the directory of the file the keyset path finally names,
// through symbolic links (stores.File.Dir), never beside a link. A keyset
// in a store has no directory: it needs an absolute path. The file is
// created with O_EXCL: if anything is there by then (a file planted since
// the check, a dangling symbolic link), nothing is written or used. It
// returns nil if kek names no local file.
func createLocalKEK(kek, keyset string) (*localKEK, error) {
	u, err := url.Parse(kek)
	if err != nil || u.Scheme != "local" {
		return nil, nil
	}
	dir := ""
	if stores.IsURL(keyset) {
		if p, _, _ := localkek.Source(u, ""); p != "" && !filepath.IsAbs(p) {
			return nil, usageError{fmt.Errorf("a keyset in a store needs an absolute local KEK path or local://env/NAME, not %s", redact.URL(kek))}
		}
	} else {
		dir = stores.NewFile(keyset).Dir()
	}
	path, env, err := localkek.Source(u, dir)
	if err != nil || env != "" {
		return nil, err
	}
	if _, err := os.Stat(path); err == nil {
		return &localKEK{path: path}, nil
	}
	key := backends.NewLocalKey() + "\n"
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("%s appeared while sealctl was creating it, or is a symbolic link to nowhere: not creating a KEK there, and not using it", path)
	}
	if err != nil {
		return nil, fmt.Errorf("creating local KEK: %w", err)
	}
	_, err = f.WriteString(key)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("writing local KEK %s: %w", path, err)
	}
	return &localKEK{path: path, created: true, sum: sha256.Sum256([]byte(key))}, nil
}

// check reports a created KEK file that no longer holds what was written:
// someone replaced it while the command used it.
func (k *localKEK) check() error {
	if k == nil || !k.created {
		return nil
	}
	b, err := os.ReadFile(k.path)
	if err != nil || sha256.Sum256(b) != k.sum {
		return fmt.Errorf("the KEK file %s that sealctl created was changed or removed while sealctl used it: "+
			"the keyset may now be wrapped by a key someone else holds; rewrap again to a new file", k.path)
	}
	return nil
}

// undo removes a KEK file the command created, after the command failed.
func (k *localKEK) undo() {
	if k != nil && k.created {
		os.Remove(k.path)
	}
}

// report says which KEK file the command created, or used.
func (k *localKEK) report(w io.Writer) {
	switch {
	case k == nil:
	case k.created:
		fmt.Fprintf(w, "created KEK %s (mode 0600): keep it secret, back it up\n", k.path)
	default:
		fmt.Fprintf(w, "using the existing KEK file %s\n", k.path)
	}
}

func newRotate(p *paths) *cobra.Command {
	var alg string
	var now bool
	cmd := &cobra.Command{
		Use:   "rotate",
		Short: "Add a new key that starts sealing after the propagation delay",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var ro rotation.RotateOptions
			if alg != "" {
				a, err := keyring.ParseAlgorithm(alg)
				if err != nil {
					return usageError{err}
				}
				ro.Algorithm = a
			}
			ro.Immediate = now
			res, err := p.edit(cmd.Context(), func() (rotation.Result, error) {
				return rotation.Rotate(cmd.Context(), p.keysetPath(), &ro, p.options())
			})
			if err != nil {
				return err
			}
			k, _ := res.Keyset.Key(res.Key)
			fmt.Fprintf(cmd.OutOrStdout(), "rotated: key %s (%s) seals from %s; keyset version %d\n",
				keyring.FormatID(k.ID), k.Algorithm, k.Activation.Format(time.RFC3339), res.Keyset.Version)
			warn(cmd.ErrOrStderr(), res)
			return nil
		},
	}
	cmd.Flags().StringVar(&alg, "alg", "", "algorithm of the new key (default: the primary's)")
	cmd.Flags().BoolVar(&now, "now", false, "seal with the new key at once (emergencies: skips the propagation delay)")
	return cmd
}

func warn(w io.Writer, res rotation.Result) {
	for _, s := range res.Warnings {
		fmt.Fprintln(w, "warning:", s)
	}
}

// keyCommand makes promote, demote and retire: one key id argument.
func keyCommand(p *paths, use, short string, op func(cmd *cobra.Command, path string, id uint32) (rotation.Result, error)) *cobra.Command {
	return &cobra.Command{
		Use:   use + " KEY-ID",
		Short: short,
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			id, err := parseKeyID(a[0])
			if err != nil {
				return err
			}
			res, err := p.edit(cmd.Context(), func() (rotation.Result, error) { return op(cmd, p.keysetPath(), id) })
			if err != nil {
				return err
			}
			k, _ := res.Keyset.Key(id)
			fmt.Fprintf(cmd.OutOrStdout(), "key %s is %s; keyset version %d\n", a[0], k.State, res.Keyset.Version)
			warn(cmd.ErrOrStderr(), res)
			return nil
		},
	}
}

func newPromote(p *paths) *cobra.Command {
	return keyCommand(p, "promote", "Make a key the primary now (emergencies)", func(cmd *cobra.Command, path string, id uint32) (rotation.Result, error) {
		return rotation.Promote(cmd.Context(), path, id, p.options())
	})
}

func newDemote(p *paths) *cobra.Command {
	return keyCommand(p, "demote", "Make a key decrypt-only: it opens tokens but never seals", func(cmd *cobra.Command, path string, id uint32) (rotation.Result, error) {
		return rotation.Demote(cmd.Context(), path, id, p.options())
	})
}

func newRetire(p *paths) *cobra.Command {
	var force bool
	cmd := keyCommand(p, "retire", "Retire a key once every token it sealed has expired", func(cmd *cobra.Command, path string, id uint32) (rotation.Result, error) {
		return rotation.Retire(cmd.Context(), path, id, &rotation.RetireOptions{Force: force}, p.options())
	})
	cmd.Flags().BoolVar(&force, "force", false, "retire now, rejecting tokens still valid (after a key leak)")
	return cmd
}

func newPrune(p *paths) *cobra.Command {
	return &cobra.Command{
		Use:   "prune",
		Short: "Remove retired keys from the keyset",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			before, err := p.readKeyset(cmd.Context())
			if err != nil {
				return err
			}
			res, err := p.edit(cmd.Context(), func() (rotation.Result, error) {
				return rotation.Prune(cmd.Context(), p.keysetPath(), p.options())
			})
			if err != nil {
				return err
			}
			n := len(before.Keys) - len(res.Keyset.Keys)
			if n == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "nothing to prune: no retired key; keyset version %d unchanged\n", res.Keyset.Version)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "pruned %d retired keys; keyset version %d\n", n, res.Keyset.Version)
			return nil
		},
	}
}

func newRewrap(p *paths) *cobra.Command {
	var to string
	cmd := &cobra.Command{
		Use:   "rewrap [--to URL]",
		Short: "Re-encrypt every data key under a new KEK, or the KEK's newest version; no token breaks",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to == "" {
				// The same KEK: each key moves to its newest version (after
				// a Vault transit or Cloud KMS rotation, say). It is the
				// configured KEK, never the one the keyset names.
				if to = rotation.DefaultKEK(p.keysetPath(), p.options()); to == "" {
					return usageError{fmt.Errorf("rewrap of a keyset in a store needs --kek (or $%s)", envKEK)}
				}
			}
			lk, err := createLocalKEK(to, p.keysetPath())
			if err != nil {
				return err
			}
			res, err := p.edit(cmd.Context(), func() (rotation.Result, error) {
				return rotation.Rewrap(cmd.Context(), p.keysetPath(), to, p.options())
			})
			if err != nil {
				lk.undo()
				return err
			}
			if err := lk.check(); err != nil {
				return err
			}
			lk.report(cmd.OutOrStdout())
			fmt.Fprintf(cmd.OutOrStdout(), "rewrapped %d keys under %s; keyset version %d\n", len(res.Keyset.Keys), redact.URL(to), res.Keyset.Version)
			return nil
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "URL of the new KEK (a local file that does not exist is created); default: the keyset's own, at its newest version")
	return cmd
}

func newRefresh(p *paths) *cobra.Command {
	var stale, current bool
	cmd := &cobra.Command{
		Use:   "refresh [--stale] [--current]",
		Short: "Rewrite the keyset unchanged to renew its expiry (the scheduler does it on its own)",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			o := p.options()
			o.AllowStale, o.Current = stale, current
			res, err := p.edit(cmd.Context(), func() (rotation.Result, error) {
				return rotation.Refresh(cmd.Context(), p.keysetPath(), o)
			})
			if errors.Is(err, rotation.ErrUnvouched) {
				return fmt.Errorf("%w (this machine's record, %s, vouches only for a version it first saw less than half the freshness window ago: "+
					"a keyset it saw longer ago may have moved on and been rolled back to it)", err, seenPath())
			}
			if err != nil {
				return err
			}
			// The version it vouched for, with its tag: what the operator
			// compares with the instances' /healthz (a split view shows
			// another tag at the same version).
			from := ""
			if h := res.Keyset.History; len(h) > 0 {
				from = fmt.Sprintf("; edited from version %d tag %s", h[0].Version, keysetjson.FormatWrapped(h[0].Tag))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "refreshed keyset %s: version %d loads until %s (tag %s%s)\n",
				res.Keyset.ID, res.Keyset.Version, res.Keyset.Expires.Format(time.RFC3339), res.Keyset.TagText(), from)
			return nil
		},
	}
	cmd.Flags().BoolVar(&stale, "stale", false, "refresh a keyset that has already expired, after checking it is the newest version (not a rollback)")
	cmd.Flags().BoolVar(&current, "current", false, "refresh a keyset this machine has no record of, after checking it is the newest version (a running instance's /healthz)")
	return cmd
}

func newUpgrade(p *paths) *cobra.Command {
	var current bool
	cmd := &cobra.Command{
		Use:   "upgrade [--current]",
		Short: "Rewrite a keyset of format version 2 or 3 as version 4 (no key changes)",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			o := p.options()
			o.Current = current
			res, err := rotation.Upgrade(cmd.Context(), p.keysetPath(), o)
			if err != nil {
				return p.inFile(err)
			}
			recordSeen(res.Keyset)
			fmt.Fprintf(cmd.OutOrStdout(), "upgraded keyset %s to format version 4: version %d, freshness %s, loads until %s\n",
				res.Keyset.ID, res.Keyset.Version, res.Keyset.Policy.Freshness, res.Keyset.Expires.Format(time.RFC3339))
			return nil
		},
	}
	cmd.Flags().BoolVar(&current, "current", false, "the keyset is the newest copy: checked against a running instance's /healthz (needed for a format-2 keyset this machine has no record of, which carries no expiry)")
	return cmd
}

func newKEK() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "kek [--out FILE]",
		Short: "Generate a local KEK: print its value (for local://env/NAME), or write a 0600 file",
		Long: `kek generates a new local key-encryption key.

Without --out it prints the key's value on standard output, for a secret
store or an environment variable that the KEK URL local://env/NAME names:

    export STATESEAL_KEK_VALUE="$(sealctl kek)"
    sealctl --kek local://env/STATESEAL_KEK_VALUE init

With --out it writes the key to a new file, mode 0600, for local:FILE.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				fmt.Fprintln(cmd.OutOrStdout(), backends.NewLocalKey())
				return nil
			}
			if _, err := os.Lstat(out); err == nil {
				return fmt.Errorf("%s already exists; not overwriting a key", out)
			}
			if err := backends.GenerateLocal(out); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created KEK %s (mode 0600): keep it secret, back it up\n", out)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "write the key to this new file instead of printing it")
	return cmd
}
