//go:build !race

package runbook

// raceSlowdown scales the generous time bounds of limit tests (see race_test.go).
const raceSlowdown = 1
