package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoFile reads a file of the repository by its path from the repository's root.
func repoFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// CI runs exactly the test command the README gives a new user (with -count=1, so nothing
// is cached), so the timeout the README promises is the one CI proves enough.
func TestCIRunsTheREADMETestCommand(t *testing.T) {
	m := regexp.MustCompile(`(?m)^(go test [^#\n]*?)\s+# run the tests$`).FindStringSubmatch(repoFile(t, "README.md"))
	if m == nil {
		t.Fatal(`README.md has no "go test … # run the tests" line in its first commands`)
	}
	readme := m[1]
	if !strings.Contains(readme, "-timeout ") {
		t.Fatalf("README's test command %q has no -timeout: cmd/rbook's end-to-end tests pass go test's default 10 minutes on a busy 2-core machine", readme)
	}
	want := strings.Replace(readme, " ./...", " -count=1 ./...", 1)
	var got []string
	for _, line := range strings.Split(repoFile(t, ".ci/run"), "\n") {
		if strings.HasPrefix(line, "go test ") {
			got = append(got, line)
		}
	}
	if len(got) == 0 || got[0] != want {
		t.Fatalf(".ci/run's first go test line is %q, want the README's command %q", got, want)
	}
}
