package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestStdinThatCanNeverAnswerIsNamed holds noInputReason to its list: a pipe whose writer is
// gone with nothing left in it, the null device and a file read to its end can never answer a
// gate; a pipe with a live writer or unread data, and a file with data left, might. On
// Windows the pipe cases go through PeekNamedPipe (stdin_windows.go), on unix through poll.
func TestStdinThatCanNeverAnswerIsNamed(t *testing.T) {
	const pipeGone = "standard input is closed (its writer is gone and it holds no input)"
	pipe := func(t *testing.T, data string, closeWriter bool) *os.File {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close(); w.Close() })
		if data != "" {
			if _, err := w.WriteString(data); err != nil {
				t.Fatal(err)
			}
		}
		if closeWriter {
			w.Close()
		}
		return r
	}
	file := func(t *testing.T, data string) *os.File {
		p := filepath.Join(t.TempDir(), "stdin")
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	for _, c := range []struct {
		name  string
		stdin func(t *testing.T) *os.File
		want  string
	}{
		{"pipe whose writer is gone, empty", func(t *testing.T) *os.File { return pipe(t, "", true) }, pipeGone},
		{"pipe whose writer is gone, answer unread", func(t *testing.T) *os.File { return pipe(t, "approve\n", true) }, ""},
		{"pipe with a live writer, empty", func(t *testing.T) *os.File { return pipe(t, "", false) }, ""},
		{"pipe with a live writer, answer unread", func(t *testing.T) *os.File { return pipe(t, "approve\n", false) }, ""},
		{"null device", func(t *testing.T) *os.File {
			f, err := os.Open(os.DevNull)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return f
		}, "standard input is " + os.DevNull},
		{"empty file", func(t *testing.T) *os.File { return file(t, "") }, "standard input is an empty file"},
		{"file with an answer", func(t *testing.T) *os.File { return file(t, "approve\n") }, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := c.stdin(t)
			if got := noInputReason(f); got != c.want {
				t.Errorf("noInputReason = %q, want %q", got, c.want)
			}
		})
	}
}

// TestStdinCheckReadsNothing: deciding that a pipe might answer leaves its data for the gate.
func TestStdinCheckReadsNothing(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := w.WriteString("approve\n"); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if got := noInputReason(r); got != "" {
		t.Fatalf("noInputReason = %q, want \"\"", got)
	}
	buf := make([]byte, 16)
	n, err := r.Read(buf)
	if err != nil || string(buf[:n]) != "approve\n" {
		t.Fatalf("read %q, %v after the check; want the answer untouched", buf[:n], err)
	}
}
