package seal

import (
	"errors"
	"time"
	"unsafe"

	"github.com/stateseal/stateseal/internal/envelope"
	"github.com/stateseal/stateseal/keyring"
)

// A Sealer seals and opens tokens with the keys of a ring. It is safe for
// concurrent use, and follows the ring: a snapshot stored in the ring takes
// effect on the next call.
type Sealer struct {
	ring *keyring.Ring
	cfg  config
	set  cipherCache
}

// New returns a Sealer over ring. nil options mean DefaultTTL,
// DefaultMaxTTL, DefaultSkew and DefaultMaxTokenLen, tightened by the
// policy of a keyset the ring was loaded from.
func New(ring *keyring.Ring, o *Options) (*Sealer, error) {
	if ring == nil {
		return nil, errors.New("seal: nil keyring")
	}
	cfg, err := newConfig(o)
	if err != nil {
		return nil, err
	}
	return &Sealer{ring: ring, cfg: cfg}, nil
}

// Seal seals payload under b with the ring's primary key and returns the
// token. ttl 0 means the default TTL; a ttl above the maximum is capped at
// it; lifetimes count in whole seconds, rounded up.
func (s *Sealer) Seal(b Binding, payload []byte, ttl time.Duration) (string, error) {
	sc := getScratch()
	defer putScratch(sc)
	raw, err := s.sealRaw(sc, b, payload, ttl, nil)
	if err != nil {
		return "", err
	}
	tok := envelope.AppendEncode(make([]byte, 0, envelope.EncodedLen(len(raw))), raw)
	// tok is never written again, so it can back the string without a copy.
	return unsafe.String(unsafe.SliceData(tok), len(tok)), nil
}

// AppendSeal is Seal appending the token to dst. With enough capacity in dst
// it allocates nothing. On error it returns dst and has written nothing.
//
// To reuse payload's storage for the token, use payload[:0] as dst. Unlike
// crypto/cipher's AEAD.Seal, any other overlap is allowed too: payload and
// b's byte slices are read whole, into a buffer of the Sealer's own,
// before anything is written to dst.
func (s *Sealer) AppendSeal(dst []byte, b Binding, payload []byte, ttl time.Duration) ([]byte, error) {
	sc := getScratch()
	defer putScratch(sc)
	raw, err := s.sealRaw(sc, b, payload, ttl, nil)
	if err != nil {
		return dst, err
	}
	return envelope.AppendEncode(dst, raw), nil
}

// sealRaw seals into sc and returns the envelope, before encoding. A nil
// nonce means a random one; the test vectors pass theirs.
func (s *Sealer) sealRaw(sc *scratch, b Binding, payload []byte, ttl time.Duration, nonce []byte) ([]byte, error) {
	snap := s.ring.Current()
	cs := s.set.get(snap, &s.cfg)
	switch {
	case ttl < 0:
		return nil, errors.New("seal: negative TTL")
	case ttl == 0:
		ttl = cs.defaultTTL
	case ttl > cs.maxTTL:
		ttl = cs.maxTTL
	}
	now := s.cfg.now()
	k, err := snap.Primary(now)
	if err != nil {
		return nil, err
	}
	c, id := cs.find(k.ID), k.ID
	if envelope.EncodedLen(envelope.Overhead(c.Version())+len(payload)) > s.cfg.maxLen {
		return nil, ErrTooLarge
	}
	iat := now.Unix()
	if iat < 0 || iat > envelope.MaxIssuedAt {
		return nil, errors.New("seal: clock outside the token format's range")
	}
	h := envelope.Header{
		Version:  c.Version(),
		KeyID:    id,
		IssuedAt: iat,
		Lifetime: uint32((ttl + time.Second - 1) / time.Second),
	}
	// The associated data and the envelope share one buffer, the envelope
	// after the associated data.
	ad := appendAD(sc.buf[:0], h, &b)
	var full []byte
	if nonce == nil {
		full = c.Seal(ad, ad, payload)
	} else {
		full = c.SealWithNonce(ad, ad, payload, nonce)
	}
	sc.buf = full[:0]
	return full[len(ad):], nil
}

func appendAD(dst []byte, h envelope.Header, b *Binding) []byte {
	dst = envelope.AppendHeader(dst, h)
	return envelope.AppendBinding(dst, b.Method, b.Target, b.Principal, b.Audience, b.Session, b.ArgsDigest, b.Context)
}

// Open verifies token under b and returns its payload. See the package
// documentation for the checks and their order.
func (s *Sealer) Open(b Binding, token string) ([]byte, error) {
	// The decoder only reads its input, so the string's bytes need no copy.
	tok := unsafe.Slice(unsafe.StringData(token), len(token))
	payload, err := s.open(nil, b, tok, true)
	if err != nil {
		return nil, err
	}
	return payload, nil
}

// AppendOpen is Open taking the token as bytes and appending the payload to
// dst. With enough capacity in dst it allocates nothing. On error it returns
// dst unchanged, and no payload byte is left in dst's spare capacity.
//
// To reuse token's storage for the payload, use token[:0] as dst. Unlike
// crypto/cipher's AEAD.Open, any other overlap is allowed too: token and
// b's byte slices are read whole, into a buffer of the Sealer's own,
// before anything is written to dst.
func (s *Sealer) AppendOpen(dst []byte, b Binding, token []byte) ([]byte, error) {
	return s.open(dst, b, token, false)
}

// open decodes into a pooled buffer. With exact set it appends to a new
// slice of exactly the payload's size, for Open: one allocation, and no
// larger array kept alive behind the payload.
func (s *Sealer) open(dst []byte, b Binding, token []byte, exact bool) ([]byte, error) {
	now := s.cfg.now()
	if len(token) > s.cfg.maxLen {
		return dst, ErrTooLarge
	}
	sc := getScratch()
	defer putScratch(sc)
	cs := s.set.get(s.ring.Current(), &s.cfg)
	c, h, raw, ad, err := parse(cs, sc.buf[:0], b, token)
	sc.buf = raw[:0]
	if err != nil {
		return dst, err
	}
	body := raw[envelope.HeaderSize:]
	if exact {
		dst = make([]byte, 0, c.PayloadLen(len(body)))
	}
	return finish(&cs.limits, dst, c, h, body, ad, now)
}

// Check runs the checks of Open that need neither the binding nor any key
// material: length, encoding, version and key id, and that the key is of
// the token's kind. It costs the same whatever the binding, so a caller
// whose binding is expensive to compute (an argument digest of a large
// request) can reject garbage and unknown keys first. A nil error says
// nothing about authenticity: only Open does.
func (s *Sealer) Check(token string) error {
	if len(token) > s.cfg.maxLen {
		return ErrTooLarge
	}
	tok := unsafe.Slice(unsafe.StringData(token), len(token))
	sc := getScratch()
	defer putScratch(sc)
	_, _, raw, err := check(s.set.get(s.ring.Current(), &s.cfg), sc.buf[:0], tok)
	sc.buf = raw[:0]
	return err
}

// check runs the checks that need no key material: encoding, version and
// key id. It decodes the token into buf; raw is always the start of buf's
// array.
func check(cs *cipherSet, buf, tok []byte) (c *envelope.Cipher, h envelope.Header, raw []byte, err error) {
	raw, err = envelope.AppendDecode(buf, tok)
	if err != nil {
		return nil, h, buf, ErrMalformed
	}
	h, err = envelope.ParseHeader(raw)
	if err != nil {
		return nil, h, raw, ErrMalformed
	}
	if c = cs.find(h.KeyID); c == nil {
		return nil, h, raw, ErrUnknownKey
	}
	if c.Version() != h.Version {
		// A key opens only tokens of its own kind, so the version byte can
		// never pick the algorithm. This fails as a forgery would.
		return nil, h, raw, ErrInvalid
	}
	return c, h, raw, nil
}

// parse runs check, then appends the associated data after the decoded
// token, in the same array. raw is always the start of that array.
func parse(cs *cipherSet, buf []byte, b Binding, tok []byte) (c *envelope.Cipher, h envelope.Header, raw, ad []byte, err error) {
	c, h, raw, err = check(cs, buf, tok)
	if err != nil {
		return nil, h, raw, nil, err
	}
	full := appendAD(raw, h, &b)
	return c, h, full[:len(raw)], full[len(raw):], nil
}

// finish authenticates, then applies the time checks. The time verdict is
// computed first but reported only for an authentic token.
func finish(lim *limits, dst []byte, c *envelope.Cipher, h envelope.Header, body, ad []byte, now time.Time) ([]byte, error) {
	verdict := lim.checkTime(h, now)
	n := len(dst)
	out, err := c.Open(dst, ad, body)
	if err != nil {
		return dst, ErrInvalid
	}
	if verdict != nil {
		clear(out[n:])
		return dst, verdict
	}
	return out, nil
}

// checkTime works in whole Unix seconds, the resolution of the header. For
// an integer T, now >= T exactly when now.Unix() >= T, so truncating now
// loses nothing.
func (lim *limits) checkTime(h envelope.Header, now time.Time) error {
	if int64(h.Lifetime) > lim.maxTTLSec {
		return errLifetime
	}
	t := now.Unix()
	if h.IssuedAt-lim.skewSec > t {
		return ErrNotYetValid
	}
	if t >= h.IssuedAt+int64(h.Lifetime)+lim.skewSec {
		return ErrExpired
	}
	return nil
}
