package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/rotation"
	"github.com/stateseal/stateseal/stores"
)

// The keyset and KEK are found the way git finds its repository: in the
// current directory unless a flag or an environment variable says
// otherwise.
const (
	defaultKeyset = "keyset.json"
	defaultKEK    = "local:stateseal.kek"
	envKeyset     = "STATESEAL_KEYSET"
	envKEK        = "STATESEAL_KEK"
	envKeysetID   = "STATESEAL_KEYSET_ID"
)

type paths struct {
	keyset   string // --keyset, $STATESEAL_KEYSET, ./keyset.json
	kek      string // --kek, $STATESEAL_KEK; "" means local:stateseal.kek for a file
	keysetID string // --keyset-id, $STATESEAL_KEYSET_ID; "" pins nothing
	minVer   uint64 // --min-version
}

func (p *paths) register(cmd *cobra.Command) {
	f := cmd.PersistentFlags()
	f.StringVar(&p.keyset, "keyset", "", "keyset file or store URL (vault-kv://..., redis://...; default $"+envKeyset+", else ./"+defaultKeyset+")")
	f.StringVar(&p.kek, "kek", "", "URL of the KEK the keyset must be under: trust comes from here, never from the keyset (default $"+envKEK+", else "+defaultKEK+" for a keyset file; required for a store)")
	f.StringVar(&p.keysetID, "keyset-id", "", "refuse any keyset but this id (default $"+envKeysetID+")")
	f.Uint64Var(&p.minVer, "min-version", 0, "refuse keyset versions below this one")
}

func (p *paths) keysetIDPin() string {
	if p.keysetID != "" {
		return p.keysetID
	}
	return os.Getenv(envKeysetID)
}

func (p *paths) keysetPath() string {
	if p.keyset != "" {
		return p.keyset
	}
	if v := os.Getenv(envKeyset); v != "" {
		return v
	}
	return defaultKeyset
}

func (p *paths) kekURL() string {
	if p.kek != "" {
		return p.kek
	}
	return os.Getenv(envKEK)
}

func (p *paths) options() *rotation.Options {
	// Check runs on the keyset the edit itself read and authenticated, so
	// a store swapped after sealctl's own check is still held against
	// the record of what this operator saw.
	return &rotation.Options{KEK: p.kekURL(), KeysetID: p.keysetIDPin(), MinVersion: p.minVer, Logger: quiet, Check: checkSeen, Vouch: vouchSeen}
}

func (p *paths) loadOptions() *keyset.LoadOptions {
	return &keyset.LoadOptions{KEK: p.kekURL(), KeysetID: p.keysetIDPin(), MinVersion: p.minVer}
}

// edit runs an edit, which checks the keyset it reads against the operator's
// record (seen.go), and records the version it wrote.
func (p *paths) edit(ctx context.Context, op func() (rotation.Result, error)) (rotation.Result, error) {
	// The edit itself checks the keyset it reads against the configuration,
	// its authentication and the record (p.options().Check), so no read
	// ahead of it: one read and one verification per command.
	res, err := op()
	if err != nil {
		return res, p.inFile(p.rollbackFirst(ctx, err, nil))
	}
	recordSeen(res.Keyset)
	return res, nil
}

// inFile names the keyset in an error, unless it already does, and says
// what to do when there is no keyset at all.
func (p *paths) inFile(err error) error {
	if err == nil {
		return nil
	}
	name := stores.Redact(p.keysetPath())
	if errors.Is(err, stores.ErrNotFound) {
		return fmt.Errorf("no keyset at %s. If one was there, it was lost: restore it from a backup and do not create a new one, "+
			"which would split a fleet that still runs the old one (docs/ROTATION.md). For a new deployment: 'sealctl init'. "+
			"Another location: --keyset or $%s", name, envKeyset)
	}
	if strings.Contains(err.Error(), name) {
		return err
	}
	return fmt.Errorf("%s: %w", name, err)
}

// readKeyset reads the keyset without unwrapping anything.
func (p *paths) readKeyset(ctx context.Context) (*keyset.Keyset, error) {
	s, err := keyset.OpenStore(ctx, p.keysetPath(), p.loadOptions())
	if err != nil {
		return nil, err
	}
	defer stores.Close(s)
	ks, _, err := keyset.Read(ctx, s)
	return ks, p.inFile(err)
}

// verified reads the keyset and checks it as a loader would (trusted KEK,
// pinned id, minimum version, freshness, authentication), then against
// the operator's record, so that a rollback or a fork is reported only for
// a keyset that authenticates.
func (p *paths) verified(ctx context.Context) (*keyset.Keyset, error) {
	ks, err := p.readKeyset(ctx)
	if err != nil {
		return nil, err
	}
	path, lo := p.keysetPath(), p.loadOptions()
	if err := keyset.Check(ks, path, lo); err != nil && !errors.Is(err, keyset.ErrStale) {
		return nil, p.inFile(rollbackFirst(ks, err)) // a stale keyset is for the command to refuse or refresh
	}
	kek, err := keyset.OpenKEK(ctx, path, ks.KEK, lo)
	if err != nil {
		return nil, p.inFile(rollbackFirst(ks, err))
	}
	if c, ok := kek.(io.Closer); ok {
		defer c.Close()
	}
	if err := ks.Verify(ctx, kek); err != nil {
		return nil, p.inFile(seenRollback(ks, err))
	}
	return ks, p.inFile(checkSeen(ks))
}

func parseKeyID(s string) (uint32, error) {
	id, err := keyring.ParseID(s)
	if err != nil {
		return 0, usageError{err}
	}
	return id, nil
}
