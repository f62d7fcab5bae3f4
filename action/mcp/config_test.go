package mcp

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseConfig(t *testing.T) {
	data := `{
  "mcpServers": {
    "inventory": {"command": "rbook", "args": ["mcp", "demo-inventory"], "env": {"LOG": "1"}},
    "arg": {"type": "http", "url": "https://mcp.example.test/mcp", "headers": {"Authorization": "Bearer x"}}
  }
}`
	cfg, err := ParseConfig("demo.mcp.json", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{Path: "demo.mcp.json", Servers: map[string]*Server{
		"inventory": {Name: "inventory", Command: "rbook", Args: []string{"mcp", "demo-inventory"}, Env: map[string]string{"LOG": "1"}, Line: 3, Column: 5},
		"arg":       {Name: "arg", URL: "https://mcp.example.test/mcp", Headers: map[string]string{"Authorization": "Bearer x"}, Line: 4, Column: 5},
	}}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("got %+v\nwant %+v", cfg, want)
	}
	if got := cfg.Names(); !reflect.DeepEqual(got, []string{"arg", "inventory"}) {
		t.Errorf("Names() = %v", got)
	}
	if !cfg.Servers["inventory"].Stdio() || cfg.Servers["arg"].Stdio() {
		t.Error("Stdio() does not follow command/url")
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct{ name, data, want string }{
		{"not JSON", `{"mcpServers": {"a": {"command": "x",}}}`,
			`c.json:1:38: mcpServers.a: invalid JSON: invalid character '}' looking for beginning of object key string`},
		{"truncated", `{"mcpServers": {"a": {"command": "x"`, `c.json:1:37: mcpServers.a: unexpected end of file`},
		{"top level not an object", `[]`, `c.json:1:1: (top level): must be a JSON object`},
		{"unknown top-level field", `{"servers": {}}`, `c.json:1:2: servers: unknown field (the file holds only mcpServers)`},
		{"missing mcpServers", `{}`, `c.json: mcpServers: missing; the file must hold {"mcpServers": {...}}`},
		{"no servers", `{"mcpServers": {}}`, `c.json: mcpServers: defines no server`},
		{"bad server name", `{"mcpServers": {"a b": {"command": "x"}}}`,
			`c.json:1:17: mcpServers.a b: server name must match [A-Za-z0-9._-]{1,64}`},
		{"duplicate server", "{\"mcpServers\": {\n  \"a\": {\"command\": \"x\"},\n  \"a\": {\"command\": \"y\"}}}",
			`c.json:3:3: mcpServers.a: duplicate field`},
		{"unknown server field", "{\"mcpServers\": {\"a\": {\n  \"command\": \"x\",\n  \"cwd\": \"/tmp\"}}}",
			`c.json:3:3: mcpServers.a.cwd: unknown field (want command, args, env for stdio; url, headers for streamable HTTP)`},
		{"both command and url", `{"mcpServers": {"a": {"command": "x", "url": "http://h/"}}}`,
			`c.json:1:17: mcpServers.a: set exactly one of command (stdio) and url (streamable HTTP), not both`},
		{"neither command nor url", `{"mcpServers": {"a": {"args": []}}}`,
			`c.json:1:17: mcpServers.a: set exactly one of command (stdio) and url (streamable HTTP)`},
		{"args with url", `{"mcpServers": {"a": {"url": "http://h/", "args": ["x"]}}}`,
			`c.json:1:17: mcpServers.a: args and env apply to a command, not to a url`},
		{"headers with command", `{"mcpServers": {"a": {"command": "x", "headers": {}}}}`,
			`c.json:1:17: mcpServers.a: headers apply to a url, not to a command`},
		{"command not a string", `{"mcpServers": {"a": {"command": ["x"]}}}`, `c.json:1:34: mcpServers.a.command: must be a string`},
		{"empty command", `{"mcpServers": {"a": {"command": " "}}}`, `c.json:1:34: mcpServers.a.command: must not be empty`},
		{"args not strings", `{"mcpServers": {"a": {"command": "x", "args": ["1", 2]}}}`, `c.json:1:53: mcpServers.a.args[1]: must be a string`},
		{"args not an array", `{"mcpServers": {"a": {"command": "x", "args": "-v"}}}`, `c.json:1:47: mcpServers.a.args: must be an array of strings`},
		{"env value not a string", `{"mcpServers": {"a": {"command": "x", "env": {"K": 1}}}}`, `c.json:1:52: mcpServers.a.env.K: must be a string`},
		{"env name with =", `{"mcpServers": {"a": {"command": "x", "env": {"A=B": "1"}}}}`,
			`c.json:1:47: mcpServers.a.env.A=B: environment variable names must be non-empty and contain no '=' or NUL`},
		{"bad header name", `{"mcpServers": {"a": {"url": "http://h/", "headers": {"X Y": "1"}}}}`,
			`c.json:1:55: mcpServers.a.headers.X Y: not a valid HTTP header name`},
		{"header value with newline", `{"mcpServers": {"a": {"url": "http://h/", "headers": {"X": "1\r\nY: 2"}}}}`,
			`c.json:1:60: mcpServers.a.headers.X: value must not contain line breaks`},
		{"url scheme", `{"mcpServers": {"a": {"url": "file:///etc/passwd"}}}`, `c.json:1:30: mcpServers.a.url: scheme must be http or https`},
		{"url without host", `{"mcpServers": {"a": {"url": "http:///mcp"}}}`, `c.json:1:30: mcpServers.a.url: URL has no host`},
		{"url unparsable", `{"mcpServers": {"a": {"url": "http://h/%zz?token=abc"}}}`, `c.json:1:30: mcpServers.a.url: not a valid URL`},
		{"type sse", `{"mcpServers": {"a": {"type": "sse", "url": "http://h/"}}}`,
			`c.json:1:31: mcpServers.a.type: the legacy SSE transport is not supported; use streamable HTTP`},
		{"type contradicts", `{"mcpServers": {"a": {"type": "stdio", "url": "http://h/"}}}`,
			`c.json:1:31: mcpServers.a.type: "stdio" needs command, not url`},
		{"trailing data", `{"mcpServers": {"a": {"command": "x"}}} {}`, `c.json:1:41: unexpected data after the top-level object`},
		{"multi-byte column", "{\"mcpServers\": {\"é\": {\"command\": \"x\"}}}", `c.json:1:17: mcpServers.é: server name must match`},
		{"invalid UTF-8", "{\"mcpServers\": {\"\xff\": {}}}", `c.json: file is not valid UTF-8`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ParseConfig("c.json", []byte(tt.data))
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("got %+v, %v; want a *ConfigError", cfg, err)
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error\n got %q\nwant %q", err.Error(), tt.want)
			}
		})
	}
}

func TestConfigErrorsKeepSecretsOut(t *testing.T) {
	for _, data := range []string{
		`{"mcpServers": {"a": {"url": "http://h/%zz?token=hunter2"}}}`,
		`{"mcpServers": {"a": {"url": "http://h/", "headers": {"Authorization": "hunter2\n"}}}}`,
		`{"mcpServers": {"a": {"command": "x", "env": {"TOKEN": "hunter2"}, "bogus": 1}}}`,
	} {
		_, err := ParseConfig("c.json", []byte(data))
		if err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error %v: want an error that does not quote the secret", err)
		}
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "demo.mcp.json")
	if err := os.WriteFile(good, []byte(`{"mcpServers": {"demo": {"command": "rbook"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(good)
	if err != nil || cfg.Path != good || cfg.Servers["demo"].Command != "rbook" {
		t.Fatalf("LoadConfig = %+v, %v", cfg, err)
	}

	big := filepath.Join(dir, "big.mcp.json")
	pad := strings.Repeat(" ", MaxConfigBytes-len(`{"mcpServers": {"demo": {"command": "rbook"}}}`))
	if err := os.WriteFile(big, []byte(`{"mcpServers": {"demo": {"command": "rbook"}}}`+pad), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(big); err != nil {
		t.Fatalf("a file of exactly MaxConfigBytes: %v", err)
	}
	if err := os.WriteFile(big, []byte(`{"mcpServers": {"demo": {"command": "rbook"}}}`+pad+" "), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = LoadConfig(big)
	if want := big + ": file is larger than the 65536-byte limit"; err == nil || err.Error() != want {
		t.Errorf("oversized file: %v, want %q", err, want)
	}

	missing := filepath.Join(dir, "missing.json")
	if _, err := LoadConfig(missing); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: %v, want a not-exist error naming the file", err)
	}
}

func TestSelfCommandResolvesToExecutable(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	got, err := (&Server{Name: "demo", Command: "rbook"}).ResolvedCommand()
	if err != nil || got != self {
		t.Errorf("ResolvedCommand(rbook) = %q, %v; want %q", got, err, self)
	}
	for _, cmd := range []string{"rbook-other", "/usr/bin/rbook", "./rbook"} {
		if got, err := (&Server{Command: cmd}).ResolvedCommand(); err != nil || got != cmd {
			t.Errorf("ResolvedCommand(%q) = %q, %v; want it unchanged", cmd, got, err)
		}
	}
}
