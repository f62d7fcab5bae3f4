package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/controlplane/store"
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

// newestMigration is the newest schema version the store migrates to: the highest NNNN_
// prefix in controlplane/store/migrations (PostgreSQL's migrations_pg has the same versions).
func newestMigration(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join("..", "..", "controlplane", "store", "migrations"))
	if err != nil {
		t.Fatal(err)
	}
	newest := 0
	for _, e := range ents {
		if n, err := strconv.Atoi(strings.SplitN(e.Name(), "_", 2)[0]); err == nil && n > newest {
			newest = n
		}
	}
	if newest == 0 {
		t.Fatal("no NNNN_*.sql migration in controlplane/store/migrations")
	}
	return newest
}

// docs/control-plane.md quotes the line `rbook serve` prints when it migrated a new database
// with the newest schema version, so a new migration that leaves the docs behind fails here.
func TestDocsMigrationLineNamesTheNewestSchema(t *testing.T) {
	m := regexp.MustCompile(`database schema migrated from version 0 to (\d+) \(db`).FindStringSubmatch(repoFile(t, controlPlaneDoc))
	if m == nil {
		t.Fatal(controlPlaneDoc + " no longer quotes the line \"database schema migrated from version 0 to N (db …)\"")
	}
	if want := strconv.Itoa(newestMigration(t)); m[1] != want {
		t.Fatalf("%s says the schema is migrated to version %s; the newest migration is %s", controlPlaneDoc, m[1], want)
	}
}

// controlPlaneDoc is the doc about running the control plane, which quotes its limits and
// its start-up lines.
const controlPlaneDoc = "docs/control-plane.md"

// docs/control-plane.md states the batch limits of RecordTransitions as the store enforces them
// and as the executor's recorder sends them.
func TestDocsBatchLimitsAreTheServers(t *testing.T) {
	m := regexp.MustCompile(`up to ([\d,]+) transitions of one run, at most (\d+) MiB, the server's request limit; the executor\s+sends at most (\d+) MiB per call`).
		FindStringSubmatch(repoFile(t, controlPlaneDoc))
	if m == nil {
		t.Fatal(controlPlaneDoc + " no longer states RecordTransitions' batch limits")
	}
	got := []string{strings.ReplaceAll(m[1], ",", ""), m[2], m[3]}
	want := []string{strconv.Itoa(store.MaxBatchTransitions), strconv.Itoa(store.MaxBatchBytes >> 20), strconv.Itoa(cpclient.MaxBatchBytes >> 20)}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("%s says %v (transitions, server MiB, executor MiB); the code says %v", controlPlaneDoc, got, want)
	}
	if store.MaxBatchBytes != server.DefaultMaxMessageBytes {
		t.Fatalf("store.MaxBatchBytes %d differs from the server's request limit %d the docs name", store.MaxBatchBytes, server.DefaultMaxMessageBytes)
	}
}

// Every relative link in README.md, ARCHITECTURE.md and docs/ names a file that exists and,
// with a #fragment into a Markdown file, a heading of that file (GitHub's anchor rules: lower
// case, punctuation dropped, spaces to hyphens, "-1", "-2" for repeats) or an <a id>. The
// README is the front door and the docs link each other by section, so a moved or renamed
// section breaks here rather than for a reader.
func TestDocsRelativeLinksResolve(t *testing.T) {
	root := filepath.Join("..", "..")
	files := []string{"README.md", "ARCHITECTURE.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, _ := filepath.Rel(root, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	fence := regexp.MustCompile("(?s)```.*?```")
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	scheme := regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`)
	anchors := map[string]map[string]bool{}
	checked := 0
	for _, f := range files {
		text := fence.ReplaceAllString(repoFile(t, f), "")
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			href := m[1]
			if scheme.MatchString(href) {
				continue
			}
			checked++
			target, frag, _ := strings.Cut(href, "#")
			if target == "" {
				target = f
			} else {
				target = filepath.ToSlash(filepath.Join(filepath.Dir(f), target))
			}
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(target))); err != nil {
				t.Errorf("%s: link %s: %s does not exist", f, href, target)
				continue
			}
			if frag == "" || !strings.HasSuffix(target, ".md") {
				continue
			}
			if anchors[target] == nil {
				anchors[target] = markdownAnchors(repoFile(t, target))
			}
			if !anchors[target][frag] {
				t.Errorf("%s: link %s: %s has no heading or <a id> for #%s", f, href, target, frag)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d relative links checked; is the scan reading the docs?", checked)
	}
}

// markdownAnchors returns the anchors GitHub gives the headings of a Markdown text (outside
// code fences), and every <a id="…"> in it.
func markdownAnchors(text string) map[string]bool {
	heading := regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	tag := regexp.MustCompile(`<[^>]+>`)
	drop := regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
	id := regexp.MustCompile(`<a id="([^"]+)"`)
	out, seen := map[string]bool{}, map[string]int{}
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		if inFence {
			continue
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			a := strings.ReplaceAll(drop.ReplaceAllString(tag.ReplaceAllString(strings.ToLower(m[1]), ""), ""), " ", "-")
			if n := seen[a]; n > 0 {
				out[a+"-"+strconv.Itoa(n)] = true
			} else {
				out[a] = true
			}
			seen[a]++
		}
		for _, m := range id.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
	}
	return out
}

// TestDocSectionCitationsNameRealHeadings: code, proto, tests, scripts and docs cite the
// project's docs as `docs/<file>.md, "Section"` (so a reader can open what a rule rests on);
// every such citation names a file that exists and a heading it has (the heading itself, or
// its start), so a renamed section cannot leave citations pointing nowhere.
func TestDocSectionCitationsNameRealHeadings(t *testing.T) {
	root := filepath.Join("..", "..")
	cite := regexp.MustCompile(`(docs/[\w/.-]+\.md),\s*(?:section\s*)?"([^"\n]{2,80})"`)
	heading := regexp.MustCompile(`(?m)^#{1,6}\s+(.*?)\s*$`)
	plain := func(s string) string {
		return strings.ToLower(strings.TrimSpace(strings.NewReplacer("`", "", "*", "").Replace(s)))
	}
	headings := map[string][]string{}
	text := map[string]bool{".go": true, ".proto": true, ".md": true, ".sql": true, ".sh": true, ".yaml": true, ".yml": true, ".ts": true, ".js": true, ".cantbook": true}
	skip := map[string]bool{".git": true, "gen": true, "node_modules": true, "dist": true}
	checked := 0
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skip[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		if !text[filepath.Ext(p)] {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(data), "\n") {
			for _, m := range cite.FindAllStringSubmatch(line, -1) {
				checked++
				doc, section := m[1], plain(m[2])
				hs, ok := headings[doc]
				if !ok {
					if b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(doc))); err == nil {
						hs = []string{}
						for _, h := range heading.FindAllStringSubmatch(string(b), -1) {
							hs = append(hs, plain(h[1]))
						}
					}
					headings[doc] = hs
				}
				if hs == nil {
					t.Errorf("%s:%d: cites %s, which does not exist", filepath.ToSlash(rel), i+1, doc)
					continue
				}
				if !slices.ContainsFunc(hs, func(h string) bool { return strings.HasPrefix(h, section) }) {
					t.Errorf("%s:%d: cites %s, %q: the file has no such heading", filepath.ToSlash(rel), i+1, doc, m[2])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("only %d section citations checked; is the scan reading the repository?", checked)
	}
}
