package engine

import "time"

// TimeFormat is the ISO 8601 UTC layout of every timestamp rbook writes (docs/spec/runbooks.md, "Step 7":
// timestamp_utc): RFC 3339 with nanoseconds, so entries written in one second still sort in
// execution order.
const TimeFormat = "2006-01-02T15:04:05.000000000Z"

// FormatTime renders t in TimeFormat (UTC).
func FormatTime(t time.Time) string { return t.UTC().Format(TimeFormat) }
