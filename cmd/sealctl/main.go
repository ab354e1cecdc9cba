// Command sealctl is the operator's tool for stateseal: it creates keysets,
// rotates, promotes, demotes, retires and prunes keys, rewraps them under a
// new KEK, changes the policy, verifies that every key unwraps, exports,
// imports and copies keysets between stores (backups and moves), and
// seals, opens and inspects tokens for debugging. docs/ROTATION.md is the
// runbook.
//
// Exit status: 0 on success, 1 when the operation failed, 2 on a usage
// error.
package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stateseal/stateseal/stores"

	// Every KEK backend, so that any keyset's URL opens.
	_ "github.com/stateseal/stateseal/backends/awskms"
	_ "github.com/stateseal/stateseal/backends/gcpkms"
	_ "github.com/stateseal/stateseal/backends/vault"

	// Every keyset store, so that --keyset takes any store's URL.
	"github.com/stateseal/stateseal/stores/redis"
	_ "github.com/stateseal/stateseal/stores/vaultkv"
)

func main() {
	// go-redis's own lines (a failed dial, a Sentinel switch) as records on
	// stderr, never on stdout, which carries sealctl's output.
	redis.SetLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// usageError marks errors in how the command was called.
type usageError struct{ error }

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	_, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "sealctl:", terminalSafe(scrub(err, args)))
	var ue usageError
	if errors.As(err, &ue) || isCobraUsage(err) {
		fmt.Fprintln(stderr, "Run 'sealctl --help' for usage.")
		return 2
	}
	return 1
}

// isCobraUsage recognizes the errors cobra returns, unwrapped, for an
// unknown command.
func isCobraUsage(err error) bool {
	return strings.HasPrefix(err.Error(), "unknown command")
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "sealctl",
		Short: "Manage stateseal keysets and inspect tokens",
		Long: `sealctl manages stateseal keysets: the keys that seal MCP request state.

With no flags it works on ./keyset.json under the KEK ./stateseal.kek (what
a plain "sealctl init" makes). --keyset and --kek, or $STATESEAL_KEYSET and
$STATESEAL_KEK, point elsewhere. The KEK is the one sealctl is told, never
one a keyset names: a keyset under another KEK is refused, and a keyset in
a store (redis://, vault-kv://) needs --kek. sealctl records the newest
version of each keyset it saw in $STATESEAL_STATE (a file; default
~/.local/state/stateseal/seen.json) to report rollbacks and forks.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	p := new(paths)
	p.register(root)
	root.AddCommand(newInit(p), newRotate(p), newList(p), newPromote(p), newDemote(p),
		newRetire(p), newPrune(p), newRewrap(p), newRefresh(p), newUpgrade(p), newVerify(p), newPolicy(p),
		newExport(p), newImport(p), newCopy(p),
		newKEK(), newInspect(), newSealCmd(p), newOpenCmd(p), newDemo())
	return root
}

// args wraps a cobra argument check so that its failure is a usage error.
func args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := check(cmd, a); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// scrub returns err's message with every location the command was given
// (arguments, flag values, $STATESEAL_KEYSET, $STATESEAL_KEK) shown as
// stores.Redact shows it: a library error may repeat a location verbatim,
// and a store URL may hold a password.
func scrub(err error, args []string) string {
	msg := err.Error()
	given := []string{os.Getenv(envKeyset), os.Getenv(envKEK)}
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			if _, v, ok := strings.Cut(a, "="); ok {
				a = v
			}
		}
		given = append(given, a)
	}
	for _, g := range given {
		if g == "" {
			continue
		}
		if r := stores.Redact(g); r != g {
			msg = strings.ReplaceAll(msg, g, r)
		}
	}
	return msg
}
