package runbook

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// A 100 KiB node id is refused with a diagnostic that quotes a bounded, valid UTF-8 prefix of
// it and its length, not the whole value (MaxQuotedValueBytes).
func TestHugeIDDiagnosticIsBounded(t *testing.T) {
	id := strings.Repeat("é", 50000)
	src := "version: \"1.0\"\nname: x\nnodes:\n  - {id: " + id + ", type: deterministic, command: x, args: []}\n"
	_, err := ParsePlaybook("p.cantbook", []byte(src))
	var pe *PlaybookParseError
	if !errors.As(err, &pe) || len(pe.Issues) != 1 {
		t.Fatalf("err = %v", err)
	}
	d := pe.Issues[0]
	if d.Line != 4 || d.Field != "nodes[0].id" || len(d.Message) > 400 || !utf8.ValidString(d.Message) ||
		!strings.Contains(d.Message, "(100000 bytes)") {
		t.Fatalf("diagnostic %+v (%d bytes)", d, len(d.Message))
	}
}
