package vault

import "time"

// SetRelogin403 sets how old a login must be before a 403 makes a new one,
// and returns the function that restores it.
func SetRelogin403(d time.Duration) func() {
	old := relogin403
	relogin403 = d
	return func() { relogin403 = old }
}
