// Package archcheck holds the tests that keep ARCHITECTURE.md true: its table of what each
// package may import is checked against the imports of every package's non-test files, every
// package has a row, and cmd/rbook stays wiring (under 4,000 non-test lines, no function over
// 80 lines). It has no code of its own.
package archcheck
