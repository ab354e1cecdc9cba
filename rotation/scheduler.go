package rotation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/stores"
)

// A Scheduler rotates a keyset on the keyset's rotation interval, retires
// keys once that is safe, and, given the instance's Loader, refreshes the
// keyset before its freshness window runs out. Any number of instances may run one on the same
// keyset: each edit is compare-and-swap, so exactly one rotation wins per
// interval and the others see it on their next read. Set Options.Loader
// to the instance's loader: a scheduler then never edits a keyset its
// instance would refuse (older, a fork at any version, a retired key
// revived: keyset.Loader.Check), and only then does it renew the keyset's
// expiry (renewing a copy rolled back in the store would keep it
// loadable). Without one it still refuses a keyset older than one it read
// or wrote itself, or not descending from it, and its edits keep the
// expiry they read.
type Scheduler struct {
	// Path is the keyset's location, a file path or a store URL, as in
	// keyset.Loader.
	Path    string
	Options Options
	// OnError, if set, receives every failed tick; Run carries on.
	OnError func(error)

	mu    sync.Mutex
	last  Status
	floor map[string]keyset.Link // the newest version read or written, per keyset id
}

// checkFloor refuses a keyset older than one this scheduler read or wrote
// before, or one that does not descend from it (a fork), and raises the
// floor to it otherwise: a store rolled back to an old copy, or such a
// copy edited by another, is not edited, and so never authenticated
// again at a new version, even by a scheduler that runs without a Loader.
func (s *Scheduler) checkFloor(ks *keyset.Keyset) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.floor[ks.ID]
	if ok && ks.Version < v.Version {
		return fmt.Errorf("%w: keyset %s is at version %d; this scheduler saw version %d", keyset.ErrRollback, ks.ID, ks.Version, v.Version)
	}
	if ok && !ks.Extends(v.Version, v.Tag) {
		return fmt.Errorf("%w: keyset %s version %d does not descend from version %d, which this scheduler saw", keyset.ErrFork, ks.ID, ks.Version, v.Version)
	}
	if s.floor == nil {
		s.floor = map[string]keyset.Link{}
	}
	s.floor[ks.ID] = keyset.Link{Version: ks.Version, Tag: ks.Auth.Tag}
	return nil
}

// options are s.Options with the scheduler's floor in their Check.
func (s *Scheduler) options() *Options {
	o := s.Options
	prev := o.Check
	o.Check = func(ks *keyset.Keyset) error {
		if err := s.checkFloor(ks); err != nil {
			return err
		}
		if prev != nil {
			return prev(ks)
		}
		return nil
	}
	return &o
}

// Status is what a Scheduler last did, for health checks and dashboards.
type Status struct {
	LastTick time.Time  `json:"last_tick,omitzero"` // when the last tick ended
	Result   TickResult `json:"result"`             // what it did
	Error    string     `json:"error,omitempty"`    // why it failed, or ""
}

// Status returns what the last tick did. It is safe to call while Run
// ticks.
func (s *Scheduler) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// TickResult says what one tick did.
type TickResult struct {
	Rotated   uint32   `json:"rotated,omitempty"`   // id of the key added, or 0
	Retired   []uint32 `json:"retired,omitempty"`   // keys retired
	Refreshed bool     `json:"refreshed,omitempty"` // the keyset was rewritten to renew its expiry
	// Warnings are what the tick's edits had to say though they were
	// made (an expiry kept, not renewed: this scheduler cannot vouch for
	// the keyset, which may be a rollback); each is logged too.
	Warnings []string `json:"warnings,omitempty"`
}

// Tick runs once: rotate if the newest key is older than the rotation
// interval, then retire every key whose tokens have all expired. Each step
// decides on the keyset it edits, in one compare-and-swap, so instances
// racing on the same keyset make one rotation between them; losing that race
// is not an error.
func (s *Scheduler) Tick(ctx context.Context) (tr TickResult, err error) {
	defer func() {
		st := Status{LastTick: time.Now(), Result: tr}
		if err != nil {
			st.Error = err.Error()
		}
		s.mu.Lock()
		s.last = st
		s.mu.Unlock()
	}()
	return s.tick(ctx)
}

func (s *Scheduler) tick(ctx context.Context) (TickResult, error) {
	var tr TickResult
	o := s.options()
	res, err := rotate(ctx, s.Path, nil, o, due)
	switch {
	case errors.Is(err, errNotDue), errors.Is(err, keyset.ErrConflict):
	case err != nil:
		return tr, err
	default:
		tr.Rotated = res.Key
		s.checkFloor(res.Keyset) // what it wrote
		s.warn(&tr, res.Warnings)
	}
	now := o.now()
	res, err = edit(ctx, s.Path, o, func(ks *keyset.Keyset, _ backends.KEK) (Result, error) {
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
	case errors.Is(err, errNotDue), errors.Is(err, keyset.ErrConflict):
		tr.Retired = nil // the next tick looks again
	case err != nil:
		return tr, err
	default:
		s.checkFloor(res.Keyset)
		s.warn(&tr, res.Warnings)
		for _, id := range tr.Retired {
			s.Options.logger().Info("stateseal key retired", "store", stores.Redact(s.Path), "key", keyring.FormatID(id))
		}
	}
	if tr.Rotated != 0 || tr.Retired != nil {
		return tr, nil // those edits refreshed the keyset
	}
	if o.Loader == nil {
		// Refreshing renews a version's expiry; done on an old copy put back
		// in the store, it would keep that copy loadable for good. Only a
		// scheduler that knows what its instance loaded may do it.
		return tr, nil
	}
	res, err = edit(ctx, s.Path, o, func(ks *keyset.Keyset, _ backends.KEK) (Result, error) {
		if !refreshDue(ks, now) {
			return Result{}, errNotDue
		}
		return Result{}, nil
	})
	switch {
	case errors.Is(err, errNotDue), errors.Is(err, keyset.ErrConflict):
	case err != nil:
		return tr, err
	default:
		tr.Refreshed = true
		s.checkFloor(res.Keyset)
		s.warn(&tr, res.Warnings)
		s.Options.logger().Info("stateseal keyset refreshed", "store", stores.Redact(s.Path))
	}
	return tr, nil
}

// warn logs an edit's warnings and keeps them in the tick's result (and
// so in Status): thrown away, a scheduler without a Loader would extend a
// rolled-back keyset without a word.
func (s *Scheduler) warn(tr *TickResult, ws []string) {
	for _, w := range ws {
		s.Options.logger().Warn("stateseal rotation: "+w, "store", stores.Redact(s.Path))
	}
	tr.Warnings = append(tr.Warnings, ws...)
}

// refreshDue reports whether less than half of the keyset's freshness
// window is left: a scheduler that misses a few ticks still refreshes in
// time.
func refreshDue(ks *keyset.Keyset, now time.Time) bool {
	return ks.Policy.Freshness != 0 && !now.Before(ks.Expires.Add(-ks.Policy.Freshness/2))
}

// due reports whether the newest key was created a rotation interval or
// more ago. An interval of 0 turns scheduled rotation off.
func due(ks *keyset.Keyset, now time.Time) bool {
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

// tickTimeout bounds one tick of Run.
const tickTimeout = time.Minute

// Run ticks every interval until ctx is done. Failed ticks are logged and
// passed to OnError.
func (s *Scheduler) Run(ctx context.Context, every time.Duration) error {
	if every <= 0 {
		return errors.New("rotation: tick interval must be positive")
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		// A store or KMS that hangs must not stop the scheduler for good.
		c, cancel := context.WithTimeout(ctx, tickTimeout)
		_, err := s.Tick(c)
		cancel()
		if err != nil {
			s.Options.logger().Error("stateseal rotation tick failed", "store", stores.Redact(s.Path), "err", err)
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

// MarshalJSON writes key ids as logs and sealctl show them: eight
// lower-case hex digits.
func (t TickResult) MarshalJSON() ([]byte, error) {
	out := struct {
		Rotated   string   `json:"rotated,omitempty"`
		Retired   []string `json:"retired,omitempty"`
		Refreshed bool     `json:"refreshed,omitempty"`
		Warnings  []string `json:"warnings,omitempty"`
	}{Refreshed: t.Refreshed, Warnings: t.Warnings}
	if t.Rotated != 0 {
		out.Rotated = keyring.FormatID(t.Rotated)
	}
	for _, id := range t.Retired {
		out.Retired = append(out.Retired, keyring.FormatID(id))
	}
	return json.Marshal(out)
}
