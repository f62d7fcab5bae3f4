package evidenceverify

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// journalLines is the fixture's journal split into its lines (the header first).
func journalLines(t *testing.T, f *fixture) []string {
	t.Helper()
	return strings.SplitAfter(strings.TrimSuffix(string(readFile(t, f.journal)), "\n"), "\n")
}

func TestJournalLinesThatAreNotTheEnginesTransitionsAreRefused(t *testing.T) {
	cases := []struct {
		name string
		edit func(line string) string // of the journal's line 3
		want string
	}{
		{"an unknown field", func(l string) string { return strings.Replace(l, "{", `{"approved_by":"github:alice",`, 1) }, `:3: line 3 is not a transition: json: unknown field "approved_by"`},
		{"a key twice, its first occurrence different", func(l string) string { return strings.Replace(l, "{", `{"step_name":"other",`, 1) }, `:3: line 3 is not a transition: duplicate key "step_name"`},
		{"null", func(string) string { return "null\n" }, ":3: line 3 is not a transition: a transition is a JSON object"},
		{"an empty object", func(string) string { return "{}\n" }, ":3: line 3 is not a transition: it has no kind or no seq"},
		{"two values on a line", func(l string) string { return strings.TrimSuffix(l, "\n") + " {}\n" }, "more than one JSON value"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, runA, "github:alice")
			lines := journalLines(t, f)
			lines[2] = c.edit(lines[2])
			writeFile(t, f.journal, []byte(strings.Join(lines, "")))
			_, err := Load(context.Background(), Options{Pack: f.pack, KeyFile: f.key}, nil)
			var ie *InputError
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want an *InputError containing %q", err, c.want)
			}
		})
	}
}

func TestATornLastJournalLineIsANoteInTheReport(t *testing.T) {
	f := newFixture(t, runA, "github:alice")
	data := readFile(t, f.journal)
	writeFile(t, f.journal, append(data, `{"seq":12,"kind":"run_fin`...))
	rep := f.verify(t, Options{})
	var text bytes.Buffer
	rep.WriteText(&text, false)
	n := strings.Count(string(data), "\n") + 1
	want := "· " + f.journal + ":" + strconv.Itoa(n) + ": the last line has no newline"
	if rep.Code() != ExitVerified || !strings.HasPrefix(text.String(), want) {
		t.Fatalf("exit %d, want %d and the text to start %q:\n%s", rep.Code(), ExitVerified, want, text.String())
	}
}

// NUL bytes after the journal's last line are space the executor reserved for the next
// lines (a run killed before it ended leaves them): not a torn line, nothing to note; a torn
// line written into that space is still one, and so is a line whose end reached the disk
// before its start (NUL bytes, then the rest of it): the run verifies with a note.
func TestReservedNULBytesAfterTheLastJournalLineAreNoNote(t *testing.T) {
	cases := []struct {
		name, tail string
		note       bool
	}{
		{"reserved space only", strings.Repeat("\x00", 4096), false},
		{"a torn line in the reserved space", `{"seq":12,"kind":"run_fin` + strings.Repeat("\x00", 4000), true},
		{"a line whose end came before its start", strings.Repeat("\x00", 40) + `"kind":"run_finished","seq":12}` + "\n" + strings.Repeat("\x00", 4000), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, runA, "github:alice")
			writeFile(t, f.journal, append(readFile(t, f.journal), c.tail...))
			rep := f.verify(t, Options{})
			var text bytes.Buffer
			rep.WriteText(&text, false)
			if got := strings.Contains(text.String(), "(a write a crash tore)"); rep.Code() != ExitVerified || got != c.note {
				t.Fatalf("exit %d (want %d), torn-line note %v (want %v):\n%s", rep.Code(), ExitVerified, got, c.note, text.String())
			}
		})
	}
}

func TestAnInputOverItsLimitIsRefusedNamingTheFileAndTheLimit(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.journal.jsonl")
	writeFile(t, big, bytes.Repeat([]byte("x"), 2<<20+1))
	paths := []string{big}
	if runtime.GOOS != "windows" {
		endless := filepath.Join(dir, "endless.journal.jsonl")
		if err := os.Symlink("/dev/zero", endless); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, endless)
	}
	for _, p := range paths {
		_, err := readLimited(p, "journal", 2<<20)
		want := p + `: the journal is over the limit of 2 MiB rbook reads (docs/evidence-verify.md, "Size limits")`
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", p, err, want)
		}
	}
	if data, err := readLimited(big, "journal", 2<<20+1); err != nil || len(data) != 2<<20+1 {
		t.Errorf("a file at the limit: %d bytes, %v", len(data), err)
	}
}
