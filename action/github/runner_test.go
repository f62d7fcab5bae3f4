package github

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/action/github/ghtest"
)

// runnerSim plays the GitHub runner's command processing over a log (ghtest.ActedCommands)
// and returns the commands that acted, as "name props::message".
func runnerSim(log string) []string {
	acted, _ := ghtest.ActedCommands(log)
	return acted
}

// TestEscapingFollowsGitHubsRules: messages escape %, CR and LF; properties also
// : and ,; so a step name cannot end a ::group:: line or add a property.
func TestEscapingFollowsGitHubsRules(t *testing.T) {
	if got := EscapeData("50% done\r\n::error::x"); got != "50%25 done%0D%0A::error::x" {
		t.Errorf("EscapeData = %q", got)
	}
	if got := EscapeProperty("a:b,c%\n"); got != "a%3Ab%2Cc%25%0A" {
		t.Errorf("EscapeProperty = %q", got)
	}
	var b bytes.Buffer
	l := NewLog(&b)
	l.Group("step 1/2 · check 'x\n::add-mask::y'")
	if got := b.String(); got != "::group::step 1/2 · check 'x%0A::add-mask::y'\n" {
		t.Errorf("group line %q", got)
	}
	if acted := runnerSim(b.String()); len(acted) != 1 || !strings.HasPrefix(acted[0], "group::") {
		t.Errorf("acted %q", acted)
	}
}

// TestUntrustedTextIsInsideStopCommands: text written to the Log (an MCP row
// with ::add-mask::x and ::error::pwned) is never acted on; rbook's own commands between
// writes are; every block has a fresh token that does not occur in its text.
func TestUntrustedTextIsInsideStopCommands(t *testing.T) {
	var b bytes.Buffer
	l := NewLog(&b)
	fmt.Fprint(l, "row 1\n::add-mask::x\n  ::error::pwned\n")
	l.Group("step 1/1 · check 'c'")
	fmt.Fprint(l, "partial line without a break")
	l.EndGroup()
	l.Close()
	acted := runnerSim(b.String())
	if want := []string{"group::step 1/1 · check 'c'", "endgroup::"}; fmt.Sprint(acted) != fmt.Sprint(want) {
		t.Fatalf("acted %q, want %q\n%s", acted, want, b.String())
	}
	lines := strings.Split(b.String(), "\n")
	if !strings.HasPrefix(lines[0], "::stop-commands::") || len(lines[0]) != len("::stop-commands::")+32 {
		t.Fatalf("first line %q", lines[0])
	}
	tok1 := strings.TrimPrefix(lines[0], "::stop-commands::")
	if lines[4] != "::"+tok1+"::" {
		t.Errorf("block end %q, want ::%s::", lines[4], tok1)
	}
	if strings.Count(b.String(), "::stop-commands::") != 2 || strings.Count(b.String(), tok1) != 2 {
		t.Errorf("want two blocks with distinct tokens:\n%s", b.String())
	}
	// The command after a partial line starts on its own line.
	if !strings.Contains(b.String(), "partial line without a break\n::") {
		t.Errorf("no line break before the block end:\n%s", b.String())
	}

	// Text that contains the open block's token starts a new block rather than ending it.
	var c bytes.Buffer
	l = NewLog(&c)
	toks := []string{"aaaa", "aaaa", "bbbb"}
	l.newToken = func() string { t := toks[0]; toks = toks[1:]; return t }
	fmt.Fprint(l, "first\n")
	fmt.Fprint(l, "::aaaa::\n::error::pwned\n")
	l.Close()
	if acted := runnerSim(c.String()); len(acted) != 0 {
		t.Errorf("acted %q:\n%s", acted, c.String())
	}
}

// TestMasksComeFirstAndOnce: Mask writes ::add-mask:: outside any block (it acts),
// once per value, whole and per line for a multi-line value; empty values are skipped.
func TestMasksComeFirstAndOnce(t *testing.T) {
	var b bytes.Buffer
	l := NewLog(&b)
	fmt.Fprint(l, "before\n")
	l.Mask("s3cr%t")
	l.Mask("s3cr%t")
	l.Mask("")
	l.Mask("line1\nline2")
	acted := runnerSim(b.String())
	want := []string{"add-mask::s3cr%25t", "add-mask::line1%0Aline2", "add-mask::line1", "add-mask::line2"}
	if fmt.Sprint(acted) != fmt.Sprint(want) {
		t.Errorf("acted %q, want %q", acted, want)
	}
	for _, k := range []string{"api_key", "GitHubToken", "DB_PASSWORD", "client_secret", "KEY"} {
		if !LooksSecret(k) {
			t.Errorf("LooksSecret(%q) = false", k)
		}
	}
	for _, k := range []string{"app_name", "subscriptions", "resource_group"} {
		if LooksSecret(k) {
			t.Errorf("LooksSecret(%q) = true", k)
		}
	}
}

// TestAnnotationsAreCapped: at most MaxAnnotations error annotations, with file,
// line and title escaped as properties; the rest are counted.
func TestAnnotationsAreCapped(t *testing.T) {
	var b bytes.Buffer
	l := NewLog(&b)
	for i := range MaxAnnotations + 3 {
		ok, err := l.Annotate("runbooks/prod.yaml", 12+i, "rbook: step 'a,b' FAIL", "failed\nsecond line")
		if err != nil || ok != (i < MaxAnnotations) {
			t.Fatalf("annotation %d: ok=%v err=%v", i, ok, err)
		}
	}
	acted := runnerSim(b.String())
	if len(acted) != MaxAnnotations || l.Suppressed() != 3 {
		t.Fatalf("%d annotations, %d suppressed", len(acted), l.Suppressed())
	}
	if want := "error file=runbooks/prod.yaml,line=12,title=rbook%3A step 'a%2Cb' FAIL::failed%0Asecond line"; acted[0] != want {
		t.Errorf("annotation %q, want %q", acted[0], want)
	}
}

// TestSummaryIsCutAt1MiB: the summary file never grows past MaxSummaryBytes; a cut
// is at a line boundary and ends with SummaryTruncatedNote; what fits is written whole.
func TestSummaryIsCutAt1MiB(t *testing.T) {
	p := filepath.Join(t.TempDir(), "summary.md")
	os.WriteFile(p, []byte("gate announcement\n"), 0o644)
	line := strings.Repeat("x", 99) + "\n"
	md := strings.Repeat(line, MaxSummaryBytes/100+50)
	cut, err := AppendSummary(p, md)
	if err != nil || !cut {
		t.Fatalf("cut=%v err=%v", cut, err)
	}
	got, _ := os.ReadFile(p)
	if len(got) > MaxSummaryBytes || !strings.HasSuffix(string(got), SummaryTruncatedNote) || !strings.HasPrefix(string(got), "gate announcement\n") {
		t.Fatalf("summary is %d bytes, suffix %q", len(got), got[max(0, len(got)-120):])
	}
	body := strings.TrimSuffix(strings.TrimPrefix(string(got), "gate announcement\n"), SummaryTruncatedNote)
	if !strings.HasSuffix(body, "\n") || strings.Count(body, line) != len(body)/len(line) || len(body)%len(line) != 0 {
		t.Errorf("not cut at a line boundary: %d bytes", len(body))
	}
	if len(got) < MaxSummaryBytes-len(line)-len(SummaryTruncatedNote) {
		t.Errorf("cut too much: %d bytes", len(got))
	}
	// A full file gets nothing more (not even the note fits); a small text fits whole.
	if cut, _ := AppendSummary(p, line); !cut {
		t.Error("appended past the limit")
	}
	if after, _ := os.ReadFile(p); len(after) != len(got) {
		t.Errorf("file grew from %d to %d", len(got), len(after))
	}
	q := filepath.Join(t.TempDir(), "s.md")
	if cut, err := AppendSummary(q, "# Runbook Execution Report\n"); cut || err != nil {
		t.Errorf("cut=%v err=%v", cut, err)
	}

	// The summary is this step's own file: ResetSummary cuts it back to
	// its size when rbook started (SummarySize), so the final summary replaces the gate block
	// and keeps what an earlier writer left; after a reset the 1 MiB cap still holds.
	base := SummarySize(p)
	if base != int64(len(got)) || SummarySize(filepath.Join(t.TempDir(), "none")) != 0 || SummarySize("") != 0 {
		t.Errorf("SummarySize = %d, want %d (0 for a missing file)", base, len(got))
	}
	r := filepath.Join(t.TempDir(), "r.md")
	os.WriteFile(r, []byte("earlier step\n"), 0o644)
	start := SummarySize(r)
	AppendSummary(r, "### gate waits for a decision\n")
	if err := ResetSummary(r, start); err != nil {
		t.Fatal(err)
	}
	if cut, err := AppendSummary(r, md); err != nil || !cut {
		t.Fatalf("cut=%v err=%v", cut, err)
	}
	final, _ := os.ReadFile(r)
	if !strings.HasPrefix(string(final), "earlier step\nxxx") || strings.Contains(string(final), "waits for a decision") || len(final) > MaxSummaryBytes {
		t.Errorf("after ResetSummary: %d bytes, starts %q", len(final), final[:min(len(final), 40)])
	}
	if err := ResetSummary(filepath.Join(t.TempDir(), "none"), 0); err != nil {
		t.Errorf("ResetSummary of a missing file: %v", err)
	}
}

// parseFileCommand reads a $GITHUB_OUTPUT file with GitHub's grammar (ghtest.ParseFileCommands).
func parseFileCommand(t *testing.T, text string) map[string]string {
	t.Helper()
	out, err := ghtest.ParseFileCommands(text)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOutputsRefuseTheirDelimiter: outputs are heredoc blocks with a random
// delimiter per value; a value holding the delimiter is refused and nothing is written;
// go-githubactions' fixed delimiter in a value does not inject an output.
func TestOutputsRefuseTheirDelimiter(t *testing.T) {
	if _, err := FormatFileCommand("approval-comment", "ok\nghadelimiter_abc\nstatus=COMPLETED", "ghadelimiter_abc"); err == nil || !strings.Contains(err.Error(), "contains the delimiter") {
		t.Errorf("err = %v", err)
	}
	if _, err := FormatFileCommand("bad<<name", "v", "ghadelimiter_abc"); err == nil {
		t.Error("accepted a bad output name")
	}
	p := filepath.Join(t.TempDir(), "output")
	hostile := "LGTM\n_GitHubActionsFileCommandDelimeter_\nstatus=COMPLETED"
	if err := WriteFileCommand(p, []Output{{"status", "FAILED"}, {"approval-comment", hostile}}); err != nil {
		t.Fatal(err)
	}
	text, _ := os.ReadFile(p)
	got := parseFileCommand(t, string(text))
	if len(got) != 2 || got["status"] != "FAILED" || got["approval-comment"] != hostile {
		t.Errorf("outputs %q from\n%s", got, text)
	}
	if strings.Count(string(text), DelimiterPrefix) != 4 {
		t.Errorf("want two delimiters, each twice:\n%s", text)
	}
	d1 := strings.SplitN(strings.SplitN(string(text), "\n", 2)[0], "<<", 2)[1]
	if strings.Count(string(text), d1) != 2 {
		t.Errorf("delimiters are not distinct:\n%s", text)
	}
	// A refused value leaves the file as it was.
	before := string(text)
	err := WriteFileCommand(p, []Output{{"run-id", "x"}, {"bad name", "v"}})
	if after, _ := os.ReadFile(p); err == nil || string(after) != before {
		t.Errorf("err=%v; file changed:\n%s", err, after)
	}
}

// TestMermaidGraphIsColouredAndSafe: one node per step in order, a classDef per
// status and a class per node, the gate's approver; a hostile name ends neither the label
// nor the code fence.
func TestMermaidGraphIsColouredAndSafe(t *testing.T) {
	g := MermaidGraph([]GraphStep{
		{Name: "a", Type: "check", Status: "PASS"},
		{Name: "gate\"]\n```\n<b>x</b>", Type: "confirm", Status: "FAIL", Approver: "alice,bob"},
		{Name: "c", Type: "deploy", Status: "not run"},
		{Name: "d", Type: "confirm", Status: GraphWithdrawn},
	})
	for _, want := range []string{"class s3 withdrawn", "classDef withdrawn ", "confirm · withdrawn (run interrupted)", "```mermaid\nflowchart TD\n", `s0["1. a<br/>check · PASS"]`, "s0 --> s1", "s1 --> s2",
		"classDef pass ", "classDef fail ", "classDef notrun ", "class s0 pass", "class s1 fail", "class s2 notrun", "decided by alice,bob"} {
		if !strings.Contains(g, want) {
			t.Errorf("graph lacks %q:\n%s", want, g)
		}
	}
	if strings.Count(g, "```") != 2 || strings.Contains(g, "<b>") || strings.Count(g, "\"]") != 4 {
		t.Errorf("the name broke out:\n%s", g)
	}
}
