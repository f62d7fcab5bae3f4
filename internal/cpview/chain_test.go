package cpview

import (
	"bytes"
	"strings"
	"testing"

	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

func TestRunViewShowsTheChainHead(t *testing.T) {
	const head = "sha256:1505ce7410acb5c6302e37c7b9fe62032cfbbcf5f0881b8a6d9da731460b777e"
	var b bytes.Buffer
	WriteRun(&b, &rbookv1.GetRunResponse{Run: &rbookv1.Run{RunId: "R", LastSeq: 7, ChainHead: head}})
	if !strings.Contains(b.String(), "Chain head "+head+" (transition 7)") {
		t.Fatalf("rbook get shows:\n%s\nwant the chain head and its transition", b.String())
	}
	b.Reset()
	WriteRun(&b, &rbookv1.GetRunResponse{Run: &rbookv1.Run{RunId: "R", LastSeq: 7}})
	if strings.Contains(b.String(), "Chain head") {
		t.Fatalf("a run without the chain shows a chain head:\n%s", b.String())
	}
}
