package daemon

import "time"

// SetExtendPeriod sets how often NotifyStarting extends the start timeout
// and returns the function that restores it.
func SetExtendPeriod(d time.Duration) (restore func()) {
	old := extendPeriod
	extendPeriod = d
	return func() { extendPeriod = old }
}
