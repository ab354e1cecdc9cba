package rotation

import (
	"context"
	"errors"
	"time"

	"github.com/stateseal/stateseal/keyring"
)

// A Scheduler rotates a keyset file on the keyset's rotation interval and
// retires keys once that is safe. Any number of instances may run one on
// the same file: each edit is compare-and-swap, so exactly one rotation
// wins per interval and the others see it on their next read.
type Scheduler struct {
	Path    string
	Options Options
	// OnError, if set, receives every failed tick; Run carries on.
	OnError func(error)
}

// TickResult says what one tick did.
type TickResult struct {
	Rotated uint32   // id of the key added, or 0
	Retired []uint32 // keys retired
}

// Tick runs once: rotate if the newest key is older than the rotation
// interval, then retire every key whose tokens have all expired. Losing a
// compare-and-swap race to another instance is not an error.
func (s *Scheduler) Tick(ctx context.Context) (TickResult, error) {
	var tr TickResult
	ks, err := keyring.ReadKeysetFile(s.Path)
	if err != nil {
		return tr, err
	}
	now := s.Options.now()
	if due(ks, now) {
		res, err := Rotate(ctx, s.Path, RotateOptions{}, &s.Options)
		switch {
		case errors.Is(err, keyring.ErrConflict):
			// Another instance edited first; its rotation counts.
		case err != nil:
			return tr, err
		default:
			tr.Rotated = res.Key
			ks = res.Keyset
		}
	}
	for _, k := range ks.Keys {
		if k.State == keyring.Retired {
			continue
		}
		if at, ok := SafeToRetire(ks, k.ID); ok && !now.Before(at) {
			res, err := Retire(ctx, s.Path, k.ID, false, &s.Options)
			switch {
			case errors.Is(err, keyring.ErrConflict):
				return tr, nil // the keyset moved on; the next tick looks again
			case err != nil:
				return tr, err
			}
			tr.Retired = append(tr.Retired, k.ID)
			ks = res.Keyset
		}
	}
	return tr, nil
}

// due reports whether the newest key was created a rotation interval or
// more ago. An interval of 0 turns scheduled rotation off.
func due(ks *keyring.Keyset, now time.Time) bool {
	if ks.Policy.RotationInterval == 0 {
		return false
	}
	var newest time.Time
	for _, k := range ks.Keys {
		if k.Created.After(newest) {
			newest = k.Created
		}
	}
	return !now.Before(newest.Add(ks.Policy.RotationInterval))
}

// Run ticks every interval until ctx is done. Failed ticks are logged and
// passed to OnError.
func (s *Scheduler) Run(ctx context.Context, every time.Duration) error {
	if every <= 0 {
		return errors.New("rotation: tick interval must be positive")
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if _, err := s.Tick(ctx); err != nil {
			s.Options.logger().Error("stateseal rotation tick failed", "path", s.Path, "err", err)
			if s.OnError != nil {
				s.OnError(err)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
