package rotation

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/keysetjson"
	"github.com/stateseal/stateseal/internal/localkek"
	"github.com/stateseal/stateseal/internal/redact"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/stores"
)

// Export returns the keyset document at location exactly as the store
// holds it, with the keyset parsed from it, after checking it as an
// editor does: a KEK o trusts, the pinned id, the minimum version, and
// its authentication under the KEK. An expired keyset is exported too
// (a backup of what is there); the caller can tell from ks.Expires. The
// document stays authenticated, so a copy put back (Import) verifies.
func Export(ctx context.Context, location string, o *Options) ([]byte, *keyset.Keyset, error) {
	lo := o.loadOptions()
	s, err := keyset.OpenStore(ctx, location, lo)
	if err != nil {
		return nil, nil, err
	}
	data, _, err := s.Read(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("rotation: %w", err)
	}
	ks, err := keyset.Parse(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%w (in %s)", err, s)
	}
	kek, err := verifyFor(ctx, ks, location, o)
	if err != nil {
		return nil, nil, err
	}
	closeKEK(kek)
	return data, ks, nil
}

// verifyFor checks ks as a loader of location configured like o would,
// freshness aside, and its authentication under the KEK o trusts, opened
// as location's loader opens it. It returns that KEK, for the caller to
// close.
func verifyFor(ctx context.Context, ks *keyset.Keyset, location string, o *Options) (backends.KEK, error) {
	stale := Options{}
	if o != nil {
		stale = *o
	}
	stale.AllowStale = true
	if err := stale.check(ks, location); err != nil {
		return nil, err
	}
	kek, err := keyset.OpenKEK(ctx, location, ks.KEK, o.loadOptions())
	if err != nil {
		return nil, fmt.Errorf("rotation: keyset %s for %s: %w", ks.ID, stores.Redact(location), err)
	}
	if err := ks.Verify(ctx, kek); err != nil {
		closeKEK(kek)
		return nil, fmt.Errorf("rotation: %w (for %s)", err, stores.Redact(location))
	}
	return kek, nil
}

// ImportOptions shape an import. A nil *ImportOptions means the zero
// value: the document is written as it is.
type ImportOptions struct {
	// AsVersion, if set, writes the document's keys and policy at this
	// version instead of its own, authenticated again under the KEK with a
	// new expiry: for a backup older than a version the fleet has seen,
	// which running instances refuse at its own version. It must exceed
	// the document's version and the location's.
	AsVersion uint64
	// Check, if set, is called with the keyset about to be written, once
	// it has authenticated and the location's keyset allows it; an error
	// stops the import. sealctl checks its
	// record of the versions it has seen here.
	Check func(*keyset.Keyset) error
	// Seen, if set, returns the newest version of keyset id that the
	// caller saw (its tag) and the keys it saw retired in it: sealctl's
	// record. An AsVersion import into a location that holds no keyset of
	// that id links to it, so that instances that installed it follow the
	// restore, and keeps its retired keys retired.
	Seen func(id string) (keyset.Link, []uint32, bool)
}

// Import writes the keyset document data into location: into a location
// that holds no keyset, or over an older version of the same keyset,
// compare-and-swap on the revision it read, so a writer that got there
// first makes it fail with keyset.ErrConflict. Before writing, the
// document is checked as a loader of location configured like o would
// (trusted KEK, pinned id, minimum version; an expired one is written
// with a warning) and authenticated under the KEK. It refuses a location
// holding another keyset (keyset.ErrOtherKeyset), a newer version
// (keyset.ErrRollback: running instances never go back), or another
// document at the same version (keyset.ErrFork); the same document at
// the same version writes nothing. A document under a relative local KEK
// cannot go into a store, which has no directory to resolve it against.
func Import(ctx context.Context, location string, data []byte, iop *ImportOptions, o *Options) (Result, error) {
	if len(data) > stores.MaxSize {
		return Result{}, stores.TooLarge("the document", int64(len(data)))
	}
	ks, err := keyset.Parse(data)
	if err != nil {
		return Result{}, err
	}
	if rel := relativeLocalKEK(ks.KEK); rel != "" && stores.IsURL(location) && !strings.HasPrefix(location, "file://") {
		return Result{}, fmt.Errorf("rotation: keyset %s is under the relative local KEK %s, which a keyset in a store cannot use (a store has no directory "+
			"to find %s in): rewrap it first to an absolute path (local:/etc/stateseal/kek), local://env/NAME or a KMS (sealctl rewrap --to URL), then move it",
			ks.ID, redact.URL(ks.KEK), rel)
	}
	kek, err := verifyFor(ctx, ks, location, o)
	if err != nil {
		return Result{}, err
	}
	defer closeKEK(kek)
	var res Result
	s, err := keyset.OpenStore(ctx, location, o.loadOptions())
	if err != nil {
		return Result{}, err
	}
	old, rev, err := s.Read(ctx)
	var cur *keyset.Keyset
	switch {
	case errors.Is(err, stores.ErrNotFound):
		rev = ""
	case err != nil:
		return Result{}, fmt.Errorf("rotation: %w", err)
	default:
		if cur, err = keyset.Parse(old); err != nil {
			return Result{}, fmt.Errorf("rotation: %s holds no readable keyset (%w): import writes only where there is no keyset, or over an older version of "+
				"the same one; keep a copy of what is there and delete it first", s, err)
		}
	}
	if iop != nil && iop.AsVersion != 0 {
		if ks, data, err = asVersion(ctx, ks, cur, iop, kek, o, &res); err != nil {
			return Result{}, err
		}
	}
	switch {
	case cur == nil:
	case cur.ID != ks.ID:
		return Result{}, fmt.Errorf("%w: %s holds keyset %s, not %s: import never puts one keyset in the place of another, which would split a fleet "+
			"pinned to the first; use another location, or delete the keyset there deliberately first", keyset.ErrOtherKeyset, s, cur.ID, ks.ID)
	case ks.Version < cur.Version:
		return Result{}, fmt.Errorf("%w: %s holds keyset %s at version %d, and the document is version %d: running instances never go back to a "+
			"lower version, so it would only stop them following the keyset. Edit the current keyset instead, or, to bring this copy's keys "+
			"back on purpose, import it at a version above %d (sealctl import --as-version; docs/ROTATION.md, \"Backups and restores\")",
			keyset.ErrRollback, s, cur.ID, cur.Version, ks.Version, cur.Version)
	case ks.Version == cur.Version && sameDocument(cur, ks):
		res.Keyset, res.Replaced = cur, cur.Version
		res.Warnings = append(res.Warnings, fmt.Sprintf("%s holds this document already (keyset %s version %d); nothing written", s, ks.ID, ks.Version))
		return res, nil
	case ks.Version == cur.Version:
		return Result{}, fmt.Errorf("%w: %s holds another document as keyset %s version %d: instances that loaded one refuse the other. "+
			"Import only a newer version (sealctl import --as-version, above %d)", keyset.ErrFork, s, ks.ID, ks.Version, cur.Version)
	default:
		res.Replaced = cur.Version
	}
	if !ks.Expires.IsZero() && !o.now().Before(ks.Expires) {
		res.Warnings = append(res.Warnings, fmt.Sprintf("keyset %s version %d expired at %s: fresh instances refuse it until it is rewritten; "+
			"once sure it is the newest copy, run sealctl refresh --stale", ks.ID, ks.Version, ks.Expires.Format(time.RFC3339)))
	}
	if iop != nil && iop.Check != nil {
		if err := iop.Check(ks); err != nil {
			return Result{}, err
		}
	}
	if _, err := s.Write(ctx, data, rev); err != nil {
		return Result{}, fmt.Errorf("rotation: %w", err)
	}
	res.Keyset = ks
	o.logger().Info("stateseal keyset imported", "store", stores.Redact(location), "keyset", ks.ID, "version", ks.Version, "replaced", res.Replaced)
	return res, nil
}

// asVersion returns the backup ks written at version iop.AsVersion,
// linked to the newest document it can name: the keyset the location
// holds (cur) if it is the same keyset, authentic, and descends from the
// version the caller saw (iop.Seen); else that version, if above the
// backup's; and the backup itself; so the instances that installed any
// of them follow the restore. Every key retired in any of them stays retired. The expiry is
// new (the operator says this is the keyset that should win).
func asVersion(ctx context.Context, ks, cur *keyset.Keyset, iop *ImportOptions, kek backends.KEK, o *Options, res *Result) (*keyset.Keyset, []byte, error) {
	v := iop.AsVersion
	if v <= ks.Version {
		return nil, nil, fmt.Errorf("rotation: keyset %s is at version %d; writing it as version %d would not move it forward", ks.ID, ks.Version, v)
	}
	from := ks.Version
	links := append([]keyset.Link{{Version: ks.Version, Tag: ks.Auth.Tag}}, ks.History...)
	retired := slices.Clone(ks.RetiredKeys)
	var seen keyset.Link
	var seenRetired []uint32
	known := false
	if iop.Seen != nil {
		seen, seenRetired, known = iop.Seen(ks.ID)
	}
	switch {
	case cur != nil && cur.ID == ks.ID && cur.KEK == ks.KEK && cur.Version > ks.Version &&
		(!known || cur.Extends(seen.Version, seen.Tag)) && cur.Verify(ctx, kek) == nil:
		// Authentic, and not off the caller's record: its history and
		// retired keys are the fleet's.
		links = append([]keyset.Link{{Version: cur.Version, Tag: cur.Auth.Tag}}, cur.History...)
		retired = append(retired, cur.RetiredKeys...)
	case known && seen.Version > ks.Version:
		// The location lost the keyset, or holds a fork of it: the
		// caller's record names the newest version the fleet installed.
		links = append([]keyset.Link{seen}, links...)
		retired = append(retired, seenRetired...)
	}
	if v <= links[0].Version {
		return nil, nil, fmt.Errorf("rotation: keyset %s was at version %d; writing the backup as version %d would not move it forward", ks.ID, links[0].Version, v)
	}
	next := ks.Clone()
	for i := range next.Keys {
		k := &next.Keys[i]
		if slices.Contains(retired, k.ID) && k.State != keyring.Retired {
			res.Warnings = append(res.Warnings, fmt.Sprintf("key %s is %s in the backup but was retired since: it stays retired", keyring.FormatID(k.ID), k.State))
			k.State = keyring.Retired
		}
	}
	prev := &keyset.Keyset{Version: v - 1, RetiredKeys: slices.Compact(slices.Sorted(slices.Values(retired)))}
	next.Follow(prev)
	next.History = links[:min(len(links), keysetjson.MaxHistory)]
	next.Refresh(o.now())
	if _, ok := next.Primary(o.now()); !ok {
		return nil, nil, fmt.Errorf("rotation: keyset %s as version %d would have no key able to seal: its keys were retired since the backup", ks.ID, v)
	}
	if err := next.Authenticate(ctx, kek); err != nil {
		return nil, nil, err
	}
	data, err := next.Marshal()
	if err != nil {
		return nil, nil, err
	}
	res.Warnings = append(res.Warnings, fmt.Sprintf("version %d written as version %d: keys added since that copy are gone, with the tokens they sealed; "+
		"keys retired since stay retired", from, v))
	return next, data, nil
}

// sameDocument reports whether a and b say the same thing, authentication
// included.
func sameDocument(a, b *keyset.Keyset) bool {
	da, err1 := a.Marshal()
	db, err2 := b.Marshal()
	return err1 == nil && err2 == nil && bytes.Equal(da, db)
}

// relativeLocalKEK returns the file a local KEK identity names if it is
// relative, else "".
func relativeLocalKEK(kek string) string {
	u, err := url.Parse(kek)
	if err != nil || u.Scheme != "local" {
		return ""
	}
	p, env, err := localkek.Source(u, "")
	if err != nil || env != "" || filepath.IsAbs(p) {
		return ""
	}
	return p
}
