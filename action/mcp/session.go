package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rbookhq/rbook-action/action/mcp/procgroup"
)

// ClientName and ClientVersion identify rbook to MCP servers in the initialize handshake.
const (
	ClientName    = "rbook"
	ClientVersion = "1"
)

// MaxResponseBytes caps what rbook reads of one message from an MCP server (8 MiB): one line of a stdio server's output (one JSON-RPC message), or one HTTP response
// body of a streamable HTTP server (a JSON answer, or the event stream answering one
// request). It is enforced while reading, before the message is in memory; a server that
// sends more ends the session with a *ResponseTooLargeError, so its check step FAILs
// instead of the executor running out of memory. (An answer under the cap is read whole;
// what a check step keeps of it in the evidence is still cut to 64 KiB by the engine.)
const MaxResponseBytes = 8 << 20

// ResponseTooLargeError is the error of a call (or connect) during which the server sent a
// message over MaxResponseBytes. The session is unusable afterwards: every later call on it
// returns this error too.
type ResponseTooLargeError struct {
	// Server is the configured server name; Limit is MaxResponseBytes.
	Server string
	Limit  int
}

func (e *ResponseTooLargeError) Error() string {
	return fmt.Sprintf("mcp server %q sent a message larger than %d bytes (MaxResponseBytes, %d MiB); rbook stopped reading it and closed the session", e.Server, e.Limit, e.Limit>>20)
}

// errTooLarge is what a limited reader returns once a message passed MaxResponseBytes.
var errTooLarge = fmt.Errorf("message larger than %d bytes (MaxResponseBytes)", MaxResponseBytes)

// Result is the outcome of one tool call.
type Result struct {
	// Text is the tool's text content blocks joined by newlines; other content kinds
	// (images, audio, resources) appear as a "[<kind> content omitted]" line.
	Text string
	// Structured is the tool's structuredContent as JSON, nil when the tool sent none.
	Structured json.RawMessage
	// IsError is the tool's own error flag: the call reached the tool and the tool failed.
	IsError bool
}

// Payload is the tool's answer as one string: the structured content when present (it is
// the machine-readable form), else the text. Check steps store it as the step output (
// docs/spec/runbooks.md, "Step 7": "MCP response JSON string").
func (r Result) Payload() string {
	if len(r.Structured) > 0 {
		return string(r.Structured)
	}
	return r.Text
}

// Session is an open connection to one MCP server. It is safe for concurrent use.
type Session struct {
	server string
	cs     *sdk.ClientSession
	// cmd is the stdio server's process (group leader); nil for streamable HTTP.
	cmd *exec.Cmd
	// connected turns true once the handshake has succeeded; until then stopping the stdio
	// server skips the SIGTERM grace (a server that never answered gets SIGKILL at once).
	connected atomic.Bool
	// lifetime is the session's lifetime context; stop cancels the session's own context
	// derived from it, which ends the stdio server's process group and the watch that closes
	// the session.
	lifetime context.Context
	stop     context.CancelFunc
	redactor *strings.Replacer
	// tooLarge turns true when the server sent a message over MaxResponseBytes.
	tooLarge atomic.Bool

	closeOnce sync.Once
	closeErr  error
}

// Dial connects to the server named server in cfg with ctx as both the connect bound and the
// session's lifetime; it is DialWithLifetime(ctx, ctx, cfg, server). Pass the run's context,
// not a short connect timeout, or use DialWithLifetime.
func Dial(ctx context.Context, cfg *Config, server string) (*Session, error) {
	return DialWithLifetime(ctx, ctx, cfg, server)
}

// DialWithLifetime connects to the server named server in cfg; server "" picks the only
// server and is an error when cfg has several. A stdio server runs via its (resolved) command
// in its own process group with stderr passed through; a url server is reached over streamable
// HTTP with its headers on every request.
//
// ctx bounds only the connect: starting the server and the initialize handshake. When ctx (or
// lifetime) ends first, DialWithLifetime returns an error wrapping ctx's error and a stdio
// server's process group gets SIGKILL at once (it never answered, so it gets no grace). A
// check step passes its own context here, so a server that never answers costs that step its
// deadline and nothing more.
//
// lifetime bounds the established session: when it ends, the session is closed and a stdio
// server's process group gets SIGTERM, then SIGKILL after procgroup.DefaultGrace. Errors name
// the server, never header values or URL credentials; nothing is retried
// (docs/spec/runbooks.md, "Failure handling").
func DialWithLifetime(ctx, lifetime context.Context, cfg *Config, server string) (*Session, error) {
	srv, err := pick(cfg, server)
	if err != nil {
		return nil, err
	}
	for _, c := range []context.Context{ctx, lifetime} {
		if err := c.Err(); err != nil {
			return nil, fmt.Errorf("mcp server %q: %w", srv.Name, err)
		}
	}
	sessionCtx, stop := context.WithCancel(lifetime)
	// connectCtx ends with ctx or with the session, whichever comes first.
	connectCtx, endConnect := context.WithCancel(ctx)
	defer endConnect()
	defer context.AfterFunc(sessionCtx, endConnect)()
	s := &Session{server: srv.Name, lifetime: lifetime, stop: stop}
	var transport sdk.Transport
	stopConnectWatch := func() bool { return true }
	if srv.Stdio() {
		transport, stopConnectWatch, err = s.stdioTransport(sessionCtx, connectCtx, srv)
	} else {
		transport, err = s.httpTransport(srv)
	}
	if err != nil {
		stop()
		return nil, err
	}
	client := sdk.NewClient(&sdk.Implementation{Name: ClientName, Version: ClientVersion},
		&sdk.ClientOptions{Capabilities: &sdk.ClientCapabilities{}})
	cs, err := client.Connect(connectCtx, transport, nil)
	if err == nil && !stopConnectWatch() {
		// The connect deadline passed just as the handshake finished: the server is already
		// being killed, so this session is of no use.
		_ = cs.Close()
		err = context.Cause(connectCtx)
	}
	if err != nil {
		// A connect or lifetime that ended kills the server, and the handshake may then fail
		// with the server's EOF before it sees the context: the error names the cause either way.
		for _, c := range []context.Context{connectCtx, lifetime} {
			if cause := context.Cause(c); cause != nil && !errors.Is(err, cause) {
				err = fmt.Errorf("%w (%v)", cause, err)
				break
			}
		}
		_ = procgroup.Kill(s.cmd)
		stop()
		return nil, s.callError(fmt.Errorf("mcp server %q: connect: %w", srv.Name, err))
	}
	s.connected.Store(true)
	s.cs = cs
	// Close when the lifetime ends; Close cancels sessionCtx itself, which releases this watch.
	context.AfterFunc(sessionCtx, func() { _ = s.Close() })
	return s, nil
}

func pick(cfg *Config, server string) (*Server, error) {
	if cfg == nil || len(cfg.Servers) == 0 {
		return nil, errors.New("mcp: no MCP servers configured")
	}
	if server == "" {
		if len(cfg.Servers) > 1 {
			return nil, fmt.Errorf("mcp config %s defines several servers (%s); name the one to use", cfg.Path, strings.Join(cfg.Names(), ", "))
		}
		for _, srv := range cfg.Servers {
			return srv, nil
		}
	}
	srv, ok := cfg.Servers[server]
	if !ok {
		return nil, fmt.Errorf("mcp config %s has no server %q (it defines %s)", cfg.Path, server, strings.Join(cfg.Names(), ", "))
	}
	return srv, nil
}

// stdioTransport prepares the stdio server's command. The process lives until sessionCtx
// ends, or until connectCtx ends while the handshake is still running; stopConnectWatch,
// called once the handshake has succeeded, detaches it from connectCtx and reports false when
// connectCtx had already ended (the process is then being killed).
func (s *Session) stdioTransport(sessionCtx, connectCtx context.Context, srv *Server) (_ sdk.Transport, stopConnectWatch func() bool, _ error) {
	path, err := srv.ResolvedCommand()
	if err != nil {
		return nil, nil, err
	}
	procCtx, endProc := context.WithCancel(sessionCtx)
	stopConnectWatch = context.AfterFunc(connectCtx, endProc)
	cmd := procgroup.Command(procCtx, procgroup.DefaultGrace, path, srv.Args...)
	graceful := cmd.Cancel
	cmd.Cancel = func() error {
		if s.connected.Load() {
			return graceful()
		}
		return procgroup.Kill(cmd)
	}
	cmd.Env = procgroup.Environ() // without rbook's credentials (docs/decisions/mcp-config.md, "Environment")
	for k, v := range srv.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = ServerStderr
	s.cmd = cmd
	return &commandTransport{cmd: cmd, grace: procgroup.DefaultGrace, tooLarge: &s.tooLarge}, stopConnectWatch, nil
}

// ServerStderr is where a stdio MCP server's stderr goes: rbook's own stderr, or (in a
// GitHub runner) a pipe whose lines rbook logs inside a stop-commands block, so a server's
// output cannot act as a workflow command (docs/action.md, "Runner-native output"). It is an *os.File so the
// server writes to it directly and no copy goroutine outlives the process. Set it before
// the first session starts.
var ServerStderr = os.Stderr

// commandTransport is sdk.CommandTransport with every line the server writes capped at
// MaxResponseBytes (the SDK's own cap is a fixed 16 MiB). Closing it closes the server's
// stdin, then waits up to grace for it to exit, then SIGTERM, then SIGKILL, as the MCP spec
// asks and as CommandTransport does.
type commandTransport struct {
	cmd      *exec.Cmd
	grace    time.Duration
	tooLarge *atomic.Bool
}

func (t *commandTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := procgroup.Start(t.cmd); err != nil {
		return nil, err
	}
	return (&sdk.IOTransport{
		Reader: &serverStdout{lineLimitReader{r: stdout, limit: MaxResponseBytes, tooLarge: t.tooLarge}, stdout},
		Writer: &serverStdin{WriteCloser: stdin, cmd: t.cmd, grace: t.grace},
		// rbook's own cap applies first; the SDK's stays as a backstop.
		MaxLineLength: 2 * MaxResponseBytes,
	}).Connect(ctx)
}

// serverStdout is a stdio server's stdout, read through the line cap. The connection is
// closed by closing stdin, not stdout, so a server can still write its last words; only a
// server that went over the cap has its stdout closed too, so that it cannot stay blocked
// writing the rest of its oversized message.
type serverStdout struct {
	lineLimitReader
	pipe io.Closer
}

func (s *serverStdout) Close() error {
	if s.tooLarge.Load() {
		return s.pipe.Close()
	}
	return nil
}

// serverStdin is a stdio server's stdin whose Close ends the server (MCP spec, "stdio"
// shutdown): stdin closed, wait up to grace, SIGTERM, wait, SIGKILL, wait.
type serverStdin struct {
	io.WriteCloser
	cmd   *exec.Cmd
	grace time.Duration
}

func (s *serverStdin) Close() error {
	if err := s.WriteCloser.Close(); err != nil {
		return fmt.Errorf("closing stdin: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	wait := func() (error, bool) {
		select {
		case err := <-exited:
			return err, true
		case <-time.After(s.grace):
			return nil, false
		}
	}
	if err, ok := wait(); ok {
		return err
	}
	if s.cmd.Process.Signal(syscall.SIGTERM) == nil {
		if err, ok := wait(); ok {
			return err
		}
	}
	if err := s.cmd.Process.Kill(); err != nil {
		return err
	}
	if err, ok := wait(); ok {
		return err
	}
	return errors.New("the server process does not exit")
}

// lineLimitReader fails a read, and sets tooLarge, once more than limit bytes arrived without
// a newline: one line of a stdio server is one JSON-RPC message.
type lineLimitReader struct {
	r        io.Reader
	limit    int
	line     int // bytes of the current line so far
	tooLarge *atomic.Bool
}

func (l *lineLimitReader) Read(p []byte) (int, error) {
	if l.tooLarge.Load() {
		return 0, errTooLarge
	}
	n, err := l.r.Read(p)
	chunk := p[:n]
	for {
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 {
			l.line += len(chunk)
			break
		}
		if l.line+i > l.limit {
			l.line += i
			break
		}
		l.line, chunk = 0, chunk[i+1:]
	}
	if l.line > l.limit {
		l.tooLarge.Store(true)
		return 0, errTooLarge
	}
	return n, err
}

// bodyLimitReader fails a read, and sets tooLarge, once an HTTP response body passed limit.
type bodyLimitReader struct {
	io.ReadCloser
	left     int64
	tooLarge *atomic.Bool
}

func (b *bodyLimitReader) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	if b.left -= int64(n); b.left < 0 {
		b.tooLarge.Store(true)
		return 0, errTooLarge
	}
	return n, err
}

func (s *Session) httpTransport(srv *Server) (sdk.Transport, error) {
	var secrets []string
	for _, v := range srv.Headers {
		if v != "" {
			secrets = append(secrets, v, "[REDACTED]")
		}
	}
	if u, err := url.Parse(srv.URL); err == nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			secrets = append(secrets, pw, "[REDACTED]")
		}
		if u.RawQuery != "" {
			secrets = append(secrets, u.RawQuery, "[REDACTED]")
		}
	}
	if len(secrets) > 0 {
		s.redactor = strings.NewReplacer(secrets...)
	}
	client := &http.Client{Transport: &headerTransport{headers: srv.Headers, base: http.DefaultTransport, tooLarge: &s.tooLarge}}
	return &sdk.StreamableClientTransport{
		Endpoint:   srv.URL,
		HTTPClient: client,
		// Never retry (docs/spec/runbooks.md, "Failure handling"); rbook needs no server-initiated messages.
		MaxRetries:           -1,
		DisableStandaloneSSE: true,
		MaxEventSize:         MaxResponseBytes,
	}, nil
}

// headerTransport adds the configured headers to every request and caps every response body
// at MaxResponseBytes.
type headerTransport struct {
	headers  map[string]string
	base     http.RoundTripper
	tooLarge *atomic.Bool
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		req = req.Clone(req.Context())
		for k, v := range t.headers {
			req.Header.Set(k, v)
		}
	}
	res, err := t.base.RoundTrip(req)
	if err == nil && res.Body != nil {
		res.Body = &bodyLimitReader{ReadCloser: res.Body, left: MaxResponseBytes, tooLarge: t.tooLarge}
	}
	return res, err
}

// Server returns the configured name of the server this session talks to.
func (s *Session) Server() string { return s.server }

// CallTool calls the tool name with args and waits for its answer or for ctx to end. A tool
// that ran and failed is a Result with IsError set and a nil error; protocol, transport and
// context errors are returned as errors (errors.Is(err, context.DeadlineExceeded) holds for
// a deadline) and are not retried. On ctx end the server is told to cancel the call. Once
// the server sent a message over MaxResponseBytes, this and every later call return a
// *ResponseTooLargeError.
func (s *Session) CallTool(ctx context.Context, name string, args map[string]any) (Result, error) {
	if s.tooLarge.Load() {
		return Result{}, s.callError(nil)
	}
	res, err := s.cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return Result{}, s.callError(fmt.Errorf("mcp server %q: tool %s: %w", s.server, name, err))
	}
	out := Result{IsError: res.IsError}
	var text []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			text = append(text, c.Text)
		default:
			text = append(text, fmt.Sprintf("[%s content omitted]", contentKind(c)))
		}
	}
	out.Text = strings.Join(text, "\n")
	if res.StructuredContent != nil {
		raw, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return Result{}, fmt.Errorf("mcp server %q: tool %s: structured content: %w", s.server, name, err)
		}
		out.Structured = raw
	}
	return out, nil
}

func contentKind(c sdk.Content) string {
	switch c.(type) {
	case *sdk.ImageContent:
		return "image"
	case *sdk.AudioContent:
		return "audio"
	case *sdk.ResourceLink:
		return "resource link"
	case *sdk.EmbeddedResource:
		return "resource"
	default:
		return "non-text"
	}
}

// Close ends the session: for stdio it closes the server's stdin, waits up to
// procgroup.DefaultGrace for it to exit (then SIGTERM, then SIGKILL, as the MCP spec asks) and
// finally SIGKILLs whatever else is left in its process group. It is idempotent and safe to
// call concurrently. A stdio server that exits with a failure status is reported, unless the
// session's lifetime context had already ended, or it sent a message over MaxResponseBytes
// (then rbook stopped it on purpose).
func (s *Session) Close() error {
	s.closeOnce.Do(func() {
		err := s.cs.Close()
		var exitErr *exec.ExitError
		if (s.lifetime.Err() != nil || s.tooLarge.Load()) && errors.As(err, &exitErr) {
			err = nil
		}
		if s.cmd != nil {
			err = errors.Join(err, procgroup.Kill(s.cmd))
		}
		s.stop()
		if err != nil {
			s.closeErr = s.wrap(fmt.Errorf("mcp server %q: close: %w", s.server, err))
		}
	})
	return s.closeErr
}

// callError is the error of a failed connect or call: a *ResponseTooLargeError when the
// server sent a message over MaxResponseBytes (whatever the SDK made of the cut-off read),
// else err with header values and URL credentials removed.
func (s *Session) callError(err error) error {
	if s.tooLarge.Load() {
		return &ResponseTooLargeError{Server: s.server, Limit: MaxResponseBytes}
	}
	return s.wrap(err)
}

// wrap removes header values and URL credentials from err's text, keeping errors.Is/As.
func (s *Session) wrap(err error) error {
	if s.redactor == nil || err == nil {
		return err
	}
	msg := s.redactor.Replace(err.Error())
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
