package github

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/rbookhq/rbook-action/internal/lazyregexp"
)

// MaxSummaryBytes is GitHub's limit on one step's job summary ($GITHUB_STEP_SUMMARY):
// 1 MiB; a larger file is not shown at all ("Job summary … exceeds the 1024k limit").
// AppendSummary keeps the file within it (docs/action.md, "Runner-native output").
const MaxSummaryBytes = 1 << 20

// SummaryTruncatedNote ends a job summary that AppendSummary had to cut.
const SummaryTruncatedNote = "\n\n> **rbook:** the job summary was cut here to stay under GitHub's 1 MiB limit; the full report is in the report file and the evidence pack (see the step outputs report-path and evidence-path).\n"

// AppendSummary appends markdown to the job summary file path ($GITHUB_STEP_SUMMARY), cut at
// a line boundary so that the whole file stays within MaxSummaryBytes, with
// SummaryTruncatedNote when it cut. It reports whether it cut. The text is written with one
// append; a file already over the limit gets nothing.
func AppendSummary(path, markdown string) (truncated bool, err error) {
	if path == "" {
		return false, nil
	}
	var have int64
	if info, err := os.Stat(path); err == nil {
		have = info.Size()
	}
	text, truncated := fitSummary(have, markdown)
	if text == "" {
		return truncated, nil
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return truncated, fmt.Errorf("job summary %s: %w", path, err)
	}
	_, werr := f.WriteString(text)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return truncated, fmt.Errorf("job summary %s: %w", path, werr)
	}
	return truncated, nil
}

// SummarySize is the size of the job summary file path in bytes, 0 when it does not exist
// (or path is ""): what was there before rbook started, which ResetSummary keeps.
func SummarySize(path string) int64 {
	if path == "" {
		return 0
	}
	info, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return info.Size()
}

// ResetSummary cuts the job summary file path back to size bytes (its SummarySize when rbook
// started), so what rbook wrote since — a gate's "waits for a decision" block — can be
// replaced by what is true now; $GITHUB_STEP_SUMMARY is one file per step, this step's own
// (docs/action.md, "Runner-native output"). A file that is missing or not longer is left alone.
func ResetSummary(path string, size int64) error {
	if path == "" {
		return nil
	}
	info, err := os.Stat(path)
	if err != nil || info.Size() <= size {
		return nil
	}
	if err := os.Truncate(path, size); err != nil {
		return fmt.Errorf("job summary %s: %w", path, err)
	}
	return nil
}

// fitSummary is markdown as it fits after have bytes of summary: whole, or cut after its
// last line break that leaves room for SummaryTruncatedNote (and the note). It is "" when
// not even the note fits.
func fitSummary(have int64, markdown string) (string, bool) {
	room := MaxSummaryBytes - have
	if int64(len(markdown)) <= room {
		return markdown, false
	}
	room -= int64(len(SummaryTruncatedNote))
	if room <= 0 {
		return "", true
	}
	cut := markdown[:room]
	if i := strings.LastIndexByte(cut, '\n'); i >= 0 {
		cut = cut[:i+1]
	} else {
		cut = ""
	}
	return cut + SummaryTruncatedNote, true
}

// Output is one step output (action.yml outputs; docs/action.md, "Runner-native output").
type Output struct{ Name, Value string }

// outputName is what rbook names outputs; GitHub accepts more, rbook needs no more.
var outputName = lazyregexp.New(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// DelimiterPrefix starts every heredoc delimiter rbook writes (as actions/toolkit does).
const DelimiterPrefix = "ghadelimiter_"

// FormatFileCommand is one entry of a file command ($GITHUB_OUTPUT, $GITHUB_STATE, $GITHUB_ENV)
// in GitHub's heredoc form:
//
//	name<<delim
//	value
//	delim
//
// It refuses (error, nothing returned) a name that is not [A-Za-z_][A-Za-z0-9_-]* and a value
// in which delim occurs, because such a value could end the block early and set other
// outputs (go-githubactions v1.4.0 writes a fixed delimiter, so it cannot refuse).
func FormatFileCommand(name, value, delim string) (string, error) {
	if !outputName.MatchString(name) {
		return "", fmt.Errorf("output name %q: use letters, digits, _ and -", name)
	}
	if delim == "" || strings.Contains(value, delim) {
		return "", fmt.Errorf("output %s: its value contains the delimiter %q; not written", name, delim)
	}
	return name + "<<" + delim + "\n" + value + "\n" + delim + "\n", nil
}

// WriteFileCommand appends outs to the file command file path ($GITHUB_OUTPUT or
// $GITHUB_STATE), each with its own random delimiter (DelimiterPrefix + RandomToken). If any
// entry is refused (FormatFileCommand), nothing is written and the error names it; the rest
// is written with one append.
func WriteFileCommand(path string, outs []Output) error {
	if path == "" {
		return errors.New("no file command file (GITHUB_OUTPUT / GITHUB_STATE is not set)")
	}
	var b strings.Builder
	for _, o := range outs {
		s, err := FormatFileCommand(o.Name, o.Value, DelimiterPrefix+RandomToken())
		if err != nil {
			return err
		}
		b.WriteString(s)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("step outputs %s: %w", path, err)
	}
	_, werr := f.WriteString(b.String())
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("step outputs %s: %w", path, werr)
	}
	return nil
}
