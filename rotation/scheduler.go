package rotation

import (
	"context"
	"errors"
	"time"

	"github.com/stateseal/stateseal/backends"
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
// interval, then retire every key whose tokens have all expired. Each step
// decides on the keyset it edits, in one compare-and-swap, so instances
// racing on the same file make one rotation between them; losing that race
// is not an error.
func (s *Scheduler) Tick(ctx context.Context) (TickResult, error) {
	var tr TickResult
	res, err := rotate(ctx, s.Path, RotateOptions{}, &s.Options, due)
	switch {
	case errors.Is(err, errNotDue), errors.Is(err, keyring.ErrConflict):
	case err != nil:
		return tr, err
	default:
		tr.Rotated = res.Key
	}
	now := s.Options.now()
	_, err = edit(ctx, s.Path, &s.Options, func(ks *keyring.Keyset, _ backends.KEK) (Result, error) {
		var retired []uint32
		for i := range ks.Keys {
			k := &ks.Keys[i]
			if at, ok := SafeToRetire(ks, k.ID); ok && k.State != keyring.Retired && !now.Before(at) {
				k.State = keyring.Retired
				retired = append(retired, k.ID)
			}
		}
		if len(retired) == 0 {
			return Result{}, errNotDue
		}
		tr.Retired = retired
		return Result{}, usable(ks, now)
	})
	switch {
	case errors.Is(err, errNotDue), errors.Is(err, keyring.ErrConflict):
		tr.Retired = nil // the next tick looks again
	case err != nil:
		return tr, err
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
