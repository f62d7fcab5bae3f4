//go:build race

package runbook

// raceSlowdown scales the generous time bounds of limit tests: the race detector makes the
// YAML parser several times slower.
const raceSlowdown = 10
