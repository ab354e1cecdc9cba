package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stateseal/stateseal/internal/keysetjson"
	"github.com/stateseal/stateseal/keyring"
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
)

type paths struct {
	keyset string // --keyset, $STATESEAL_KEYSET, ./keyset.json
	kek    string // --kek, $STATESEAL_KEK; "" means the keyset's own
}

func (p *paths) register(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVar(&p.keyset, "keyset", "", "keyset file or store URL (vault-kv://..., redis://...; default $"+envKeyset+", else ./"+defaultKeyset+")")
	cmd.PersistentFlags().StringVar(&p.kek, "kek", "", "KEK URL, overriding the keyset's (default $"+envKEK+")")
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
	return &rotation.Options{KEK: p.kekURL(), Logger: quiet}
}

func (p *paths) loadOptions() *keyring.LoadOptions {
	return &keyring.LoadOptions{KEK: p.kekURL()}
}

// inFile names the keyset in an error, unless it already does, and says
// what to do when there is no keyset at all.
func (p *paths) inFile(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, stores.ErrNotFound) {
		return fmt.Errorf("no keyset at %s: create one with 'sealctl init', or name one with --keyset or $%s", stores.Redact(p.keysetPath()), envKeyset)
	}
	if strings.Contains(err.Error(), stores.Redact(p.keysetPath())) {
		return err
	}
	return fmt.Errorf("%s: %w", stores.Redact(p.keysetPath()), err)
}

// readKeyset reads the keyset without unwrapping anything.
func (p *paths) readKeyset(ctx context.Context) (*keyring.Keyset, error) {
	s, err := keyring.OpenStore(ctx, p.keysetPath(), p.loadOptions())
	if err != nil {
		return nil, err
	}
	ks, _, err := keyring.ReadKeyset(ctx, s)
	return ks, p.inFile(err)
}

func parseKeyID(s string) (uint32, error) {
	id, err := keysetjson.ParseKeyID(s)
	if err != nil {
		return 0, usageError{err}
	}
	return id, nil
}
