package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// firstWrite is a stdout that closes listening at its first write (serve's address line).
type firstWrite struct {
	once      sync.Once
	listening chan struct{}
	mu        sync.Mutex
	buf       bytes.Buffer
}

func (w *firstWrite) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	defer w.once.Do(func() { close(w.listening) })
	return w.buf.Write(p)
}

// Under --log-json every line rbook serve writes on stderr is a JSON object with a msg, from
// the deprecated flag's notice and the start's migration to the gate policy's warnings, the
// shutdown and a start that fails; stdout keeps the plain address line scripts read.
func TestServeLogJSONWritesOnlyJSONOnStderr(t *testing.T) {
	t.Setenv("RBOOK_APPROVAL_SECRET", "c2lnbmluZy1zZWNyZXQtMDEyMzQ1Njc4OWFiY2RlZmdo")
	t.Setenv("RBOOK_CONFIG", "")
	dir := t.TempDir()
	policy := filepath.Join(dir, "gates.yaml")
	if err := os.WriteFile(policy, []byte("rules:\n  - runbook: prod*\n    approvals: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		args     []string
		serves   bool
		wantCode int
		wantMsgs []string
	}{
		{"a start that migrates and warns", []string{"--forbid-self-approval", "--gate-policy", policy, "--db", filepath.Join(dir, "cp.db")}, true, exitCompleted,
			[]string{"Flag --forbid-self-approval has been deprecated", "database schema migrated", "gate policy without --auth-file", "shutting down"}},
		{"a start that fails", []string{"--db", "mysql://db/rbook"}, false, exitAborted, []string{"rbook serve: --db: "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := newRootCmd()
			out := &firstWrite{listening: make(chan struct{})}
			errOut := &syncBuffer{}
			root.SetOut(out)
			root.SetErr(errOut)
			root.SetArgs(append([]string{"serve", "--log-json", "--addr", "127.0.0.1:0"}, tc.args...))
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			root.SetContext(ctx)
			code := make(chan int, 1)
			go func() { code <- execute(root, errOut) }()
			if tc.serves {
				<-out.listening
				cancel()
			}
			if got := <-code; got != tc.wantCode {
				t.Fatalf("exit code %d, want %d; stderr:\n%s", got, tc.wantCode, errOut.String())
			}
			if tc.serves && !strings.HasPrefix(out.buf.String(), "rbook control plane listening on http://127.0.0.1:") {
				t.Errorf("stdout %q, want the address line", out.buf.String())
			}
			var msgs []string
			for line := range strings.Lines(errOut.String()) {
				var rec struct {
					Msg   string `json:"msg"`
					Level string `json:"level"`
				}
				if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Msg == "" || rec.Level == "" {
					t.Errorf("stderr line is not a JSON log line: %q", line)
				}
				msgs = append(msgs, rec.Msg)
			}
			for _, want := range tc.wantMsgs {
				found := false
				for _, m := range msgs {
					found = found || strings.Contains(m, want)
				}
				if !found {
					t.Errorf("no stderr line says %q; messages %q", want, msgs)
				}
			}
		})
	}
}
