package server

// SetWatchRunHook installs f as the hook WatchRun calls between subscribing and reading its
// snapshot; the returned func removes it. Tests only; not safe while WatchRun calls run.
func SetWatchRunHook(f func(runID string)) (restore func()) {
	testHookWatchRunSubscribed = f
	return func() { testHookWatchRunSubscribed = nil }
}

// SetWatchBuffer sets the per-watcher event buffer for watchers created from now on; the
// returned func restores it.
func SetWatchBuffer(n int) (restore func()) {
	old := watchBuffer
	watchBuffer = n
	return func() { watchBuffer = old }
}

// LookupCaller is the caller a bearer token authenticates as (tests only).
func (a *Authenticator) LookupCaller(token string) (Caller, bool) { return a.lookup(token) }

// PublicError is publicError (tests only).
var PublicError = publicError
