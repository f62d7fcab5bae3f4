package runbook

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkParsePlaybook1000Nodes measures ParsePlaybook on a 1,000-node chain (the node
// limit) with a depends and an edge per node: parse, the ten rules, template references and
// the linear cycle check. Reported per file.
//
//	go test -run '^$' -bench ParsePlaybook -benchtime 20x ./action/runbook
func BenchmarkParsePlaybook1000Nodes(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("version: \"1.0\"\nname: bench\ninputs:\n  - name: v\n    required: true\nnodes:\n")
	for i := range MaxPlaybookNodes {
		fmt.Fprintf(&sb, "  - id: n%d\n    type: deterministic\n    command: echo\n    args: [\"{{ v }}\"]\n", i)
		if i > 0 {
			fmt.Fprintf(&sb, "    depends: [n%d]\n", i-1)
		}
	}
	sb.WriteString("edges:\n")
	for i := 1; i < MaxPlaybookNodes; i++ {
		fmt.Fprintf(&sb, "  - from: n%d\n    to: n%d\n", i-1, i)
	}
	src := []byte(sb.String())
	b.SetBytes(int64(len(src)))
	b.ResetTimer()
	for range b.N {
		p, err := ParsePlaybook("bench.cantbook", src)
		if err != nil || len(p.Steps) != MaxPlaybookNodes {
			b.Fatalf("parse: %v", err)
		}
	}
}
