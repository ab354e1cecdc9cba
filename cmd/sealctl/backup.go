package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/rotation"
	"github.com/stateseal/stateseal/stores"
)

// exported reads the keyset document as stored and checks it as verified
// does, the record of what was seen included, and raises the record.
func (p *paths) exported(cmd *cobra.Command) ([]byte, *keyset.Keyset, error) {
	data, ks, err := rotation.Export(cmd.Context(), p.keysetPath(), p.options())
	if err != nil {
		return nil, nil, p.inFile(p.rollbackFirst(cmd.Context(), err, nil))
	}
	if err := checkSeen(ks); err != nil {
		return nil, nil, p.inFile(err)
	}
	recordSeen(ks)
	if !ks.Expires.IsZero() && !time.Now().Before(ks.Expires) {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: keyset %s version %d expired at %s: fresh instances refuse it until it is refreshed (sealctl refresh --stale)\n",
			ks.ID, ks.Version, ks.Expires.Format(time.RFC3339))
	}
	return data, ks, nil
}

func newExport(p *paths) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "export [--out FILE]",
		Short: "Write the keyset document as stored, authenticated, for a backup or a move (after verifying it)",
		Long: `export verifies the keyset under the configured KEK (as verify does, and
against the record of what this operator saw), then writes its document
exactly as the store holds it: on standard output, or with --out into a
new file of mode 0600 (an existing file is not overwritten). The document
keeps its authentication, so 'sealctl import' can put it back and every
instance can verify it. It holds wrapped keys only: without the KEK it
opens nothing, and with the KEK everything; keep backups as you keep the
KEK's access.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			data, ks, err := p.exported(cmd)
			if err != nil {
				return err
			}
			if out == "" {
				_, err := cmd.OutOrStdout().Write(data)
				return err
			}
			if err := writeNew(out, data); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "exported keyset %s version %d to %s\n", ks.ID, ks.Version, out)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "write the document to this new file (mode 0600) instead of standard output")
	return cmd
}

// writeNew writes data to a new file of mode 0600, synced; it never
// replaces a file, nor follows a link planted where the file goes.
func writeNew(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s already exists; not overwriting it (choose a new name for each backup)", path)
	}
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

// seenImport is the record check of a document about to be imported: a
// version below one this operator saw would not be followed by instances
// that run the newer one.
func seenImport(ks *keyset.Keyset) error {
	v, ok := readSeen()[ks.ID]
	if ok && ks.Version < v.Version {
		return fmt.Errorf("%w: keyset %s version %d is older than version %d, which this operator saw (%s): instances that loaded it never go back, "+
			"so they would not follow this copy. To bring its keys back on purpose, import it with --as-version %d or higher; "+
			"or, if that version never reached any instance, remove its entry from the record",
			keyset.ErrRollback, ks.ID, ks.Version, v.Version, seenPath(), v.Version+1)
	}
	return checkSeen(ks)
}

// importInto writes data into location and reports it.
func (p *paths) importInto(cmd *cobra.Command, location string, data []byte, asVersion uint64) (rotation.Result, error) {
	res, err := rotation.Import(cmd.Context(), location, data, &rotation.ImportOptions{AsVersion: asVersion, Check: seenImport, Seen: seenLink}, p.options())
	if err != nil {
		err = p.rollbackFirst(cmd.Context(), err, data)
		if errors.Is(err, fs.ErrNotExist) && !stores.IsURL(location) {
			err = fmt.Errorf("%w (a relative local KEK is found beside each keyset file: put the KEK file beside %s too, or use an absolute KEK path)", err, location)
		}
		return res, err
	}
	recordSeen(res.Keyset)
	warn(cmd.ErrOrStderr(), res)
	return res, nil
}

func replacedText(res rotation.Result) string {
	if res.Replaced == 0 {
		return "it held no keyset"
	}
	if res.Replaced == res.Keyset.Version {
		return "it held this document already"
	}
	return fmt.Sprintf("over version %d", res.Replaced)
}

func newImport(p *paths) *cobra.Command {
	var asVersion uint64
	cmd := &cobra.Command{
		Use:   "import [--as-version N] FILE",
		Short: "Write a keyset document (a backup) into an empty location, or over an older version of the same keyset",
		Long: `import writes a keyset document, as export wrote it ("-": standard input),
into the keyset location (--keyset): one that holds no keyset, or one that
holds an older version of the same keyset. Before writing, it verifies
the document as a loader of that location would: the configured KEK, the
pinned keyset id, the minimum version, and its authentication. The write
is compare-and-swap: a writer that got there first makes it fail.

It refuses another keyset's location, an older version or another document
at the same version, and a version older than one this operator saw:
running instances never go back to a lower version. To restore an older
copy on purpose (its keys, at a version the fleet accepts), give
--as-version N, above every version the fleet saw: the document is then
authenticated again at version N. docs/ROTATION.md, "Backups and restores",
has the rules.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			var r io.Reader = cmd.InOrStdin()
			if a[0] != "-" {
				f, err := os.Open(a[0])
				if err != nil {
					return err
				}
				defer f.Close()
				r = f
			}
			data, err := io.ReadAll(io.LimitReader(r, stores.MaxSize+1))
			if err != nil {
				return err
			}
			res, err := p.importInto(cmd, p.keysetPath(), data, asVersion)
			if err != nil {
				return p.inFile(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "imported keyset %s version %d into %s: %s\n",
				res.Keyset.ID, res.Keyset.Version, stores.Redact(p.keysetPath()), replacedText(res))
			return nil
		},
	}
	cmd.Flags().Uint64Var(&asVersion, "as-version", 0, "write the document's keys at this version, authenticated again (to restore an older copy on purpose)")
	return cmd
}

func newCopy(p *paths) *cobra.Command {
	var to string
	cmd := &cobra.Command{
		Use:   "copy --to URL",
		Short: "Copy the keyset, authenticated, to another location (file, Vault KV, Redis)",
		Long: `copy verifies the keyset (as export does) and writes its document into
the location --to names (a file path or a store URL) as import does: where
there is no keyset, or over an older version of the same keyset. The copy
keeps its authentication and its KEK, so the configured KEK (--kek) must be
reachable from both places: a relative local KEK (local:stateseal.kek, the
file beside a keyset file) cannot move into a store, which has no
directory; rewrap to an absolute path, local://env/NAME or a KMS first.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to == "" {
				return usageError{errors.New("copy needs --to URL (a file path or a store URL)")}
			}
			data, ks, err := p.exported(cmd)
			if err != nil {
				return err
			}
			res, err := p.importInto(cmd, to, data, 0)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "copied keyset %s version %d from %s to %s: %s\n",
				ks.ID, ks.Version, stores.Redact(p.keysetPath()), stores.Redact(to), replacedText(res))
			return nil
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "where to copy the keyset: a file path or a store URL")
	return cmd
}
