package server

// SetPrunePassHook installs f, called with the number of runs pruned at the end of each
// retention pass; the returned func removes it. Tests only; set it before New.
func SetPrunePassHook(f func(pruned int)) (restore func()) {
	testHookPrunePass = f
	return func() { testHookPrunePass = nil }
}
