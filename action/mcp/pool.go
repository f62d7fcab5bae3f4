package mcp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// MaxListedTools caps how many tools ListTools reads from one server (1000): a server that
// pages forever cannot keep a node waiting.
const MaxListedTools = 1000

// ListTools returns the names of the tools the server offers, in the server's order, reading
// every page (at most MaxListedTools names; more is an error naming the server). Errors are
// those of CallTool: transport, protocol and ctx errors, never retried (docs/spec/playbooks.md, "Nodes": an
// agentic node with only agent calls the server's one tool).
func (s *Session) ListTools(ctx context.Context) ([]string, error) {
	if s.tooLarge.Load() {
		return nil, s.callError(nil)
	}
	var names []string
	for tool, err := range s.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, s.callError(fmt.Errorf("mcp server %q: listing tools: %w", s.server, err))
		}
		names = append(names, tool.Name)
		if len(names) > MaxListedTools {
			return nil, fmt.Errorf("mcp server %q offers more than %d tools (MaxListedTools)", s.server, MaxListedTools)
		}
	}
	return names, nil
}

// Pool holds a run's MCP sessions: at most one per server of its Config, dialled on first use
// and kept until Close (docs/spec/playbooks.md, "Nodes": an agentic node reuses its server's session for the
// run, as check steps do with theirs). It is safe for concurrent use by parallel nodes.
//
// A connect is bounded by the asking node's ctx, so a server that never answers costs that
// node its timeout and its process group is killed; a failed connect is not remembered (the
// next node dials again under its own deadline: a new attempt by a new node, not a retry). At
// most one connect per server is in progress; a node that asks meanwhile waits for it or for
// its own ctx. The pool's mutex is never held across I/O.
type Pool struct {
	cfg      *Config
	lifetime context.Context
	end      context.CancelFunc

	mu       sync.Mutex
	closed   bool
	sessions map[string]*Session
	dialing  map[string]chan struct{}
}

// NewPool returns an empty pool over cfg.
func NewPool(cfg *Config) *Pool {
	lifetime, end := context.WithCancel(context.Background())
	return &Pool{cfg: cfg, lifetime: lifetime, end: end, sessions: map[string]*Session{}, dialing: map[string]chan struct{}{}}
}

// Config returns the configuration the pool dials from.
func (p *Pool) Config() *Config { return p.cfg }

// ErrPoolClosed is returned by Session after Close.
var ErrPoolClosed = errors.New("mcp: the run's MCP sessions are closed")

// Session returns the open session to server (a name of the pool's Config), dialling it under
// ctx when there is none yet. Errors: ErrPoolClosed after Close, DialWithLifetime's errors
// (unknown server, connect failure), or ctx's error while waiting for another node's connect.
func (p *Pool) Session(ctx context.Context, server string) (*Session, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, ErrPoolClosed
		}
		if s := p.sessions[server]; s != nil {
			p.mu.Unlock()
			return s, nil
		}
		if wait := p.dialing[server]; wait != nil {
			p.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("mcp server %q: waiting for another node's connect: %w", server, ctx.Err())
			}
		}
		done := make(chan struct{})
		p.dialing[server] = done
		p.mu.Unlock()

		s, err := DialWithLifetime(ctx, p.lifetime, p.cfg, server)

		p.mu.Lock()
		delete(p.dialing, server)
		close(done)
		if err == nil {
			p.sessions[server] = s
		}
		p.mu.Unlock()
		return s, err
	}
}

// poolCloseWait bounds how long Close waits for aborted connects to kill their servers.
const poolCloseWait = 5 * time.Second

// Close ends every session of the pool (stdin closed, then SIGTERM and SIGKILL for each stdio
// server's process group) and aborts connects in progress, waiting at most poolCloseWait for
// those. It returns the sessions' close errors joined; calling it again returns nil.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	names := make([]string, 0, len(p.sessions))
	for name := range p.sessions {
		names = append(names, name)
	}
	slices.Sort(names)
	sessions := make([]*Session, len(names))
	for i, name := range names {
		sessions[i] = p.sessions[name]
	}
	var waits []chan struct{}
	for _, w := range p.dialing {
		waits = append(waits, w)
	}
	p.mu.Unlock()
	var errs []error
	for _, s := range sessions { // gracefully first: stdin closed, then the signals
		errs = append(errs, s.Close())
	}
	p.end() // aborts connects in progress; a session they still make is closed by it
	timeout := time.After(poolCloseWait)
	for _, w := range waits {
		select {
		case <-w:
		case <-timeout:
		}
	}
	return errors.Join(errs...)
}
