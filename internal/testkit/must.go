package testkit

import "fmt"

// Must returns v, and panics if err is not nil: for a test's setup, whose
// failure makes every later check meaningless, where ignoring err would
// turn a setup failure into a nil dereference later on, or into a pass.
// The panic fails the test with the stack of the call.
//
//	ring := testkit.Must(keyring.Generate(keyring.AEAD))
func Must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("testkit.Must: %v", err))
	}
	return v
}

// Must2 is Must for a call with two results before its error.
func Must2[T, U any](v T, u U, err error) (T, U) {
	if err != nil {
		panic(fmt.Sprintf("testkit.Must2: %v", err))
	}
	return v, u
}

// Check panics if err is not nil: Must for a call that returns only an
// error.
func Check(err error) {
	if err != nil {
		panic(fmt.Sprintf("testkit.Check: %v", err))
	}
}
