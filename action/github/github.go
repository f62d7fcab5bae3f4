// Package github is the runner glue of the rbook GitHub Action (ARCHITECTURE.md; docs/action.md, "Runner-native output"): the log (stop-commands blocks around untrusted text, groups, masks, error
// annotations), the job summary (cut to GitHub's 1 MiB limit, with a Mermaid graph of the
// steps) and the step outputs (heredoc file commands with random delimiters). It uses
// github.com/sethvargo/go-githubactions for the command encoding and writes the file
// commands itself, because v1.4.0 uses a fixed heredoc delimiter. Outside a runner rbook does
// not call it. It imports nothing of rbook's.
package github

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// InRunner reports whether rbook runs inside a GitHub Actions job (GITHUB_ACTIONS=true).
func InRunner() bool { return os.Getenv("GITHUB_ACTIONS") == "true" }

// Publish appends the Markdown report to $GITHUB_STEP_SUMMARY (AppendSummary: cut to
// MaxSummaryBytes) and sets the step outputs run-id and status (WriteFileCommand). Outside a
// runner (no GITHUB_ACTIONS) it does nothing. A summary that cannot be written does not
// stop the outputs; it returns both errors (errors.Join), nil when both were written.
func Publish(report, runID, status string) error {
	if !InRunner() {
		return nil
	}
	_, serr := AppendSummary(os.Getenv("GITHUB_STEP_SUMMARY"), report)
	var oerr error
	if p := os.Getenv("GITHUB_OUTPUT"); p != "" {
		oerr = WriteFileCommand(p, []Output{{"run-id", runID}, {"status", status}})
	}
	return errors.Join(serr, oerr)
}

// secretWords are the parts of a values-file key that make its value look secret (docs/action.md, "Runner-native output": keys named like *token*, *secret*, *password*, *key*).
var secretWords = []string{"token", "secret", "password", "key"}

// LooksSecret reports whether a values-file key names a secret: it contains token, secret,
// password or key, in any case (api_key, GitHubToken, DB_PASSWORD, monkey too: masking too
// much is safe).
func LooksSecret(key string) bool {
	k := strings.ToLower(key)
	for _, w := range secretWords {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// SecretTexts lists the texts of valueTexts (runbook.Plan.ValueTexts: a values-file key's
// scalar texts) whose key LooksSecret, each once, longest first (so masking a text never
// leaves part of a longer one visible). The runner masks them before anything prints them,
// and the plan sent to a control plane shows them masked.
func SecretTexts(valueTexts map[string][]string) []string {
	seen := map[string]bool{}
	var out []string
	for k, texts := range valueTexts {
		if !LooksSecret(k) {
			continue
		}
		for _, t := range texts {
			if !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	return out
}

// WorkspacePath is path (a file rbook read, relative to the working directory or absolute)
// as an annotation wants it: relative to $GITHUB_WORKSPACE with forward slashes when it lies
// inside it, else path as given (slashed).
func WorkspacePath(path string) string {
	ws := os.Getenv("GITHUB_WORKSPACE")
	abs, err := filepath.Abs(path)
	if ws == "" || err != nil {
		return filepath.ToSlash(path)
	}
	if wsAbs, err := filepath.Abs(ws); err == nil {
		if rel, err := filepath.Rel(wsAbs, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return filepath.ToSlash(rel)
		}
	}
	return filepath.ToSlash(path)
}

// RunURL is the link to this workflow run ($GITHUB_SERVER_URL/$GITHUB_REPOSITORY/actions/runs/$GITHUB_RUN_ID),
// "" when the runner did not set those.
func RunURL() string {
	s, r, id := os.Getenv("GITHUB_SERVER_URL"), os.Getenv("GITHUB_REPOSITORY"), os.Getenv("GITHUB_RUN_ID")
	if s == "" || r == "" || id == "" {
		return ""
	}
	return strings.TrimRight(s, "/") + "/" + r + "/actions/runs/" + id
}

// FileURL is the link to a workspace file at this commit
// ($GITHUB_SERVER_URL/$GITHUB_REPOSITORY/blob/$GITHUB_SHA/path), "" when unknown.
func FileURL(workspacePath string, line int) string {
	s, r, sha := os.Getenv("GITHUB_SERVER_URL"), os.Getenv("GITHUB_REPOSITORY"), os.Getenv("GITHUB_SHA")
	if s == "" || r == "" || sha == "" || strings.HasPrefix(workspacePath, "/") || strings.HasPrefix(workspacePath, "..") {
		return ""
	}
	u := strings.TrimRight(s, "/") + "/" + r + "/blob/" + sha + "/" + workspacePath
	if line > 0 {
		u += "#L" + strconv.Itoa(line)
	}
	return u
}
