// Package mcp connects rbook to MCP servers with the official go-sdk (docs/decisions/mcp-config.md): it loads the
// ecosystem's `mcpServers` JSON configuration, dials a server over stdio or streamable HTTP and
// calls tools. Errors and timeouts are returned to the caller and never retried
// (docs/spec/runbooks.md, "Failure handling").
package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/rbookhq/rbook-action/internal/lazyregexp"
)

// MaxConfigBytes caps the size of an MCP configuration file (64 KiB); a larger file is
// rejected before it is parsed.
const MaxConfigBytes = 64 << 10

// SelfCommand is the command that means "this executable": a server configured with
// command "rbook" runs os.Executable(), so the shipped demo configuration starts the demo
// inventory server from whichever rbook binary is running.
const SelfCommand = "rbook"

// serverNamePattern limits server names to what is safe in messages and flags (as docs/decisions/run-ids.md does
// for runbook names).
var serverNamePattern = lazyregexp.New(`^[A-Za-z0-9._-]{1,64}$`)

// headerNamePattern is an HTTP token (RFC 9110, section 5.6.2).
var headerNamePattern = lazyregexp.New("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// Config is a loaded `mcpServers` configuration (docs/decisions/mcp-config.md).
type Config struct {
	// Path is the file the configuration came from, as given to LoadConfig.
	Path string
	// Servers maps server name to server; it holds at least one server.
	Servers map[string]*Server
}

// Server is one entry of `mcpServers`. Exactly one of Command and URL is set.
type Server struct {
	Name string
	// Command, Args and Env start a stdio server. Env is added to rbook's own environment.
	Command string
	Args    []string
	Env     map[string]string
	// URL and Headers reach a streamable HTTP server. Header values may be credentials:
	// they are sent, never logged or put into errors.
	URL     string
	Headers map[string]string
	// Line and Column locate the server's entry in the file (1-based; Column counts runes).
	Line, Column int
}

// Stdio reports whether the server is started as a child process (Command set) rather than
// reached over streamable HTTP (URL set).
func (s *Server) Stdio() bool { return s.Command != "" }

// ResolvedCommand returns the program to run for a stdio server: os.Executable() when Command
// is exactly SelfCommand ("rbook"), else Command unchanged (exec resolves it through PATH).
// It returns os.Executable's error when that cannot be determined.
func (s *Server) ResolvedCommand() (string, error) {
	if s.Command != SelfCommand {
		return s.Command, nil
	}
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("mcp server %q: command %q means this executable, which cannot be located: %w", s.Name, SelfCommand, err)
	}
	return self, nil
}

// Names returns the server names in sorted order.
func (c *Config) Names() []string {
	names := make([]string, 0, len(c.Servers))
	for name := range c.Servers {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// ConfigError is a problem in an MCP configuration file. It never quotes values, since
// env and header values may be secrets.
type ConfigError struct {
	Path string
	// Line and Column are 1-based; 0 when the problem has no single position.
	Line, Column int
	// Field is the JSON path of the offending field, e.g. mcpServers.inventory.args[1].
	Field string
	Msg   string
}

// Error formats the error as path:line:column: field: message.
func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString(e.Path)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Column)
	}
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// LoadConfig reads and validates the `mcpServers` JSON file at path (docs/decisions/mcp-config.md). It returns
// a *ConfigError naming the file, line, column and field for: a file over MaxConfigBytes,
// malformed JSON, unknown or duplicate fields, wrong value types, a server with both or
// neither of command and url, a non-http(s) url, and an empty mcpServers. Read errors are
// returned wrapped.
func LoadConfig(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("mcp config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("mcp config %s: %w", path, err)
	}
	if len(data) > MaxConfigBytes {
		return nil, &ConfigError{Path: path, Msg: fmt.Sprintf("file is larger than the %d-byte limit", MaxConfigBytes)}
	}
	return ParseConfig(path, data)
}

// ParseConfig validates data as an `mcpServers` configuration; path is used in errors only.
// It applies the same rules and errors as LoadConfig, including the MaxConfigBytes cap.
func ParseConfig(path string, data []byte) (*Config, error) {
	if len(data) > MaxConfigBytes {
		return nil, &ConfigError{Path: path, Msg: fmt.Sprintf("file is larger than the %d-byte limit", MaxConfigBytes)}
	}
	if !utf8.Valid(data) {
		return nil, &ConfigError{Path: path, Msg: "file is not valid UTF-8"}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	p := &configParser{path: path, data: data, dec: dec}
	cfg := &Config{Path: path, Servers: map[string]*Server{}}
	sawServers := false
	err := p.object("", func(key string, keyOff int64) error {
		if key != "mcpServers" {
			return p.errAt(keyOff, key, "unknown field (the file holds only mcpServers)")
		}
		sawServers = true
		return p.object("mcpServers", func(name string, nameOff int64) error {
			field := "mcpServers." + name
			if !serverNamePattern.MatchString(name) {
				return p.errAt(nameOff, field, "server name must match [A-Za-z0-9._-]{1,64}")
			}
			srv, err := p.server(field, name, nameOff)
			if err != nil {
				return err
			}
			cfg.Servers[name] = srv
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	if off := p.tokenStart(); off < int64(len(data)) {
		return nil, p.errAt(off, "", "unexpected data after the top-level object")
	}
	if !sawServers {
		return nil, &ConfigError{Path: path, Field: "mcpServers", Msg: "missing; the file must hold {\"mcpServers\": {...}}"}
	}
	if len(cfg.Servers) == 0 {
		return nil, &ConfigError{Path: path, Field: "mcpServers", Msg: "defines no server"}
	}
	return cfg, nil
}

// configParser walks the JSON token stream so that every error carries the position of the
// offending key or value, which encoding/json's struct decoding does not give for unknown
// fields. The fixed shape also means nesting depth is bounded by the grammar, not the input.
type configParser struct {
	path string
	data []byte
	dec  *json.Decoder
}

func (p *configParser) server(field, name string, nameOff int64) (*Server, error) {
	line, col := p.position(nameOff)
	srv := &Server{Name: name, Line: line, Column: col}
	var transport string
	var transportOff int64
	err := p.object(field, func(key string, keyOff int64) error {
		sub := field + "." + key
		var err error
		switch key {
		case "command":
			srv.Command, err = p.nonEmptyString(sub)
		case "args":
			srv.Args, err = p.stringArray(sub)
		case "env":
			srv.Env, err = p.stringMap(sub, func(k string) string {
				if k == "" || strings.ContainsAny(k, "=\x00") {
					return "environment variable names must be non-empty and contain no '=' or NUL"
				}
				return ""
			})
		case "url":
			off := p.tokenStart()
			if srv.URL, err = p.nonEmptyString(sub); err == nil {
				err = p.checkURL(off, sub, srv.URL)
			}
		case "headers":
			srv.Headers, err = p.stringMap(sub, func(k string) string {
				if !headerNamePattern.MatchString(k) {
					return "not a valid HTTP header name"
				}
				return ""
			})
		case "type":
			// Accepted for compatibility with configs that spell out the transport.
			transportOff = p.tokenStart()
			transport, err = p.nonEmptyString(sub)
		default:
			err = p.errAt(keyOff, sub, "unknown field (want command, args, env for stdio; url, headers for streamable HTTP)")
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	switch {
	case srv.Command != "" && srv.URL != "":
		return nil, p.errAt(nameOff, field, "set exactly one of command (stdio) and url (streamable HTTP), not both")
	case srv.Command == "" && srv.URL == "":
		return nil, p.errAt(nameOff, field, "set exactly one of command (stdio) and url (streamable HTTP)")
	case srv.URL != "" && (srv.Args != nil || srv.Env != nil):
		return nil, p.errAt(nameOff, field, "args and env apply to a command, not to a url")
	case srv.Command != "" && srv.Headers != nil:
		return nil, p.errAt(nameOff, field, "headers apply to a url, not to a command")
	}
	switch transport {
	case "":
	case "stdio":
		if srv.URL != "" {
			return nil, p.errAt(transportOff, field+".type", `"stdio" needs command, not url`)
		}
	case "http", "streamable-http", "streamableHttp":
		if srv.Command != "" {
			return nil, p.errAt(transportOff, field+".type", "streamable HTTP needs url, not command")
		}
	case "sse":
		return nil, p.errAt(transportOff, field+".type", "the legacy SSE transport is not supported; use streamable HTTP")
	default:
		return nil, p.errAt(transportOff, field+".type", "unknown transport (want stdio or http)")
	}
	return srv, nil
}

func (p *configParser) checkURL(off int64, field, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse errors quote the URL, which may carry a token: do not pass them on.
		return p.errAt(off, field, "not a valid URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return p.errAt(off, field, "scheme must be http or https")
	}
	if u.Host == "" {
		return p.errAt(off, field, "URL has no host")
	}
	return nil
}

// object reads a JSON object, calling each for every key with the key's offset; each must
// consume the key's value. Duplicate keys are rejected: JSON leaves their meaning open.
func (p *configParser) object(field string, each func(key string, keyOff int64) error) error {
	off := p.tokenStart()
	tok, err := p.dec.Token()
	if err != nil {
		return p.syntaxErr(err, field)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return p.errAt(off, fieldOr(field), "must be a JSON object")
	}
	seen := map[string]bool{}
	for p.dec.More() {
		keyOff := p.tokenStart()
		tok, err := p.dec.Token()
		if err != nil {
			return p.syntaxErr(err, field)
		}
		key := tok.(string) // inside an object, Token always yields a string key here
		if seen[key] {
			return p.errAt(keyOff, join(field, key), "duplicate field")
		}
		seen[key] = true
		if err := each(key, keyOff); err != nil {
			return err
		}
	}
	if _, err := p.dec.Token(); err != nil { // the closing '}'
		return p.syntaxErr(err, field)
	}
	return nil
}

func (p *configParser) str(field string) (string, error) {
	off := p.tokenStart()
	tok, err := p.dec.Token()
	if err != nil {
		return "", p.syntaxErr(err, field)
	}
	s, ok := tok.(string)
	if !ok {
		return "", p.errAt(off, field, "must be a string")
	}
	if strings.ContainsRune(s, 0) {
		return "", p.errAt(off, field, "must not contain NUL")
	}
	return s, nil
}

func (p *configParser) nonEmptyString(field string) (string, error) {
	off := p.tokenStart()
	s, err := p.str(field)
	if err == nil && strings.TrimSpace(s) == "" {
		err = p.errAt(off, field, "must not be empty")
	}
	return s, err
}

func (p *configParser) stringArray(field string) ([]string, error) {
	off := p.tokenStart()
	tok, err := p.dec.Token()
	if err != nil {
		return nil, p.syntaxErr(err, field)
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return nil, p.errAt(off, field, "must be an array of strings")
	}
	out := []string{}
	for p.dec.More() {
		s, err := p.str(fmt.Sprintf("%s[%d]", field, len(out)))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	if _, err := p.dec.Token(); err != nil {
		return nil, p.syntaxErr(err, field)
	}
	return out, nil
}

// stringMap reads an object of string values; checkKey returns a problem with a key or "".
// Values are never echoed (they may be secrets).
func (p *configParser) stringMap(field string, checkKey func(string) string) (map[string]string, error) {
	out := map[string]string{}
	err := p.object(field, func(key string, keyOff int64) error {
		if problem := checkKey(key); problem != "" {
			return p.errAt(keyOff, join(field, key), problem)
		}
		off := p.tokenStart()
		v, err := p.str(join(field, key))
		if err != nil {
			return err
		}
		if strings.ContainsAny(v, "\r\n") {
			return p.errAt(off, join(field, key), "value must not contain line breaks")
		}
		out[key] = v
		return nil
	})
	return out, err
}

// tokenStart is the offset of the next token: the decoder's offset is the end of the
// previous token, before any separator.
func (p *configParser) tokenStart() int64 {
	off := p.dec.InputOffset()
	for off < int64(len(p.data)) {
		switch p.data[off] {
		case ' ', '\t', '\r', '\n', ',', ':':
			off++
		default:
			return off
		}
	}
	return off
}

// position converts a byte offset into a 1-based line and rune column.
func (p *configParser) position(off int64) (line, col int) {
	if off > int64(len(p.data)) {
		off = int64(len(p.data))
	}
	before := p.data[:off]
	line = bytes.Count(before, []byte{'\n'}) + 1
	lineStart := bytes.LastIndexByte(before, '\n') + 1
	return line, utf8.RuneCount(before[lineStart:]) + 1
}

func (p *configParser) errAt(off int64, field, msg string) error {
	line, col := p.position(off)
	return &ConfigError{Path: p.path, Line: line, Column: col, Field: field, Msg: msg}
}

func (p *configParser) syntaxErr(err error, field string) error {
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &syn):
		return p.errAt(syn.Offset, fieldOr(field), "invalid JSON: "+syn.Error())
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return p.errAt(int64(len(p.data)), fieldOr(field), "unexpected end of file")
	default:
		return p.errAt(p.dec.InputOffset(), fieldOr(field), "invalid JSON: "+err.Error())
	}
}

func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

func fieldOr(field string) string {
	if field == "" {
		return "(top level)"
	}
	return field
}
