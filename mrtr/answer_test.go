package mrtr_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/replay"
	"github.com/stateseal/stateseal/seal"
)

// TestClientError: every refusal's message ends with its reason, which is
// also data.reason; the single-use check that could not be made is the
// one retryable refusal; a seal failure says nothing more.
func TestClientError(t *testing.T) {
	open := func(err error) error { return &mrtr.StateError{Op: "open", Err: err} }
	for _, c := range []struct {
		err  error
		want mrtr.Answer
	}{
		{open(seal.ErrInvalid), mrtr.Answer{Code: -32602, Message: "invalid requestState: invalid", Reason: "invalid"}},
		{open(seal.ErrMalformed), mrtr.Answer{Code: -32602, Message: "invalid requestState: invalid", Reason: "invalid"}},
		{open(seal.ErrUnknownKey), mrtr.Answer{Code: -32602, Message: "invalid requestState: invalid", Reason: "invalid"}},
		{open(mrtr.ErrNoPrincipal), mrtr.Answer{Code: -32602, Message: "invalid requestState: invalid", Reason: "invalid"}},
		{open(mrtr.ErrArguments), mrtr.Answer{Code: -32602, Message: "invalid requestState: invalid", Reason: "invalid"}},
		{open(fmt.Errorf("wrapped: %w", seal.ErrExpired)), mrtr.Answer{Code: -32602, Message: "invalid requestState: expired", Reason: "expired"}},
		{open(replay.ErrReplayed), mrtr.Answer{Code: -32602, Message: "invalid requestState: replayed", Reason: "replayed"}},
		{open(replay.ErrUnavailable), mrtr.Answer{Code: -32603, Message: "requestState not checked, try again: unavailable", Reason: "unavailable"}},
		{errors.New("not a StateError"), mrtr.Answer{Code: -32602, Message: "invalid requestState: invalid", Reason: "invalid"}},
		{&mrtr.StateError{Op: "seal", Err: mrtr.ErrNoPrincipal}, mrtr.Answer{Code: -32603, Message: "cannot seal requestState"}},
		{fmt.Errorf("handle: %w", &mrtr.StateError{Op: "seal", Err: seal.ErrArguments}), mrtr.Answer{Code: -32603, Message: "cannot seal requestState"}},
	} {
		if got := mrtr.ClientError(c.err); got != c.want {
			t.Errorf("%v: %+v, want %+v", c.err, got, c.want)
		}
	}
}
