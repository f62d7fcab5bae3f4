package mcp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// LazySession dials the MCP server on the first call and keeps the session for the run.
//
// The connect is bounded by the calling step's context, so a server that never answers the
// initialize handshake costs that step its max_timeout_seconds (TIMED_OUT, on_fail applies)
// and its process group is killed. A failed connect is not remembered: the next check step
// dials again under its own deadline. That is a new attempt by a new step, not a retry of the
// failed call (a timed-out call is not retried; docs/spec/runbooks.md, "Failure handling"),
// and it lets a server that was merely slow to start serve later checks. At most one connect
// is in progress; a check that arrives meanwhile (possible only when the engine gave up on an
// earlier step) waits for it or for its own context, whichever ends first. A session that
// breaks after connecting is kept: later calls fail with its error.
//
// mu is never held across I/O, so Close never queues behind a connect.
type LazySession struct {
	cfg *Config
	// lifetime bounds every session; Close ends it, which also aborts a connect in progress.
	lifetime context.Context
	end      context.CancelFunc

	mu   sync.Mutex
	sess *Session
	// dialing is closed when the connect in progress ends; nil when none is.
	dialing chan struct{}
}

// NewLazySession is a LazySession for the servers of cfg; nothing is dialled yet.
func NewLazySession(cfg *Config) *LazySession {
	lifetime, end := context.WithCancel(context.Background())
	return &LazySession{cfg: cfg, lifetime: lifetime, end: end}
}

// ErrSessionClosed is returned to a check that calls after the run closed its MCP session.
var ErrSessionClosed = errors.New("mcp: the run's MCP session is closed")

// CallTool calls tool name with args on the run's session, dialling it first when there is
// none yet.
func (l *LazySession) CallTool(ctx context.Context, name string, args map[string]any) (Result, error) {
	s, err := l.session(ctx)
	if err != nil {
		return Result{}, err
	}
	return s.CallTool(ctx, name, args)
}

// session returns the run's session, dialling it under ctx when there is none yet.
func (l *LazySession) session(ctx context.Context) (*Session, error) {
	for {
		l.mu.Lock()
		if l.lifetime.Err() != nil {
			l.mu.Unlock()
			return nil, ErrSessionClosed
		}
		if l.sess != nil {
			s := l.sess
			l.mu.Unlock()
			return s, nil
		}
		if wait := l.dialing; wait != nil {
			l.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("mcp: waiting for another check's connect: %w", ctx.Err())
			}
		}
		done := make(chan struct{})
		l.dialing = done
		l.mu.Unlock()

		s, err := DialWithLifetime(ctx, l.lifetime, l.cfg, "")

		l.mu.Lock()
		l.dialing = nil
		close(done)
		if err == nil {
			l.sess = s
		}
		l.mu.Unlock()
		return s, err
	}
}

// closeWait bounds how long Close waits for an aborted connect to kill its server.
const closeWait = 5 * time.Second

// Close ends the run's MCP session: the established session is closed (stdin closed, then
// SIGTERM and SIGKILL for its process group) and a connect still in progress is aborted, which
// kills its server's process group. Close waits for that abort to finish, at most closeWait,
// never for the connect itself. A session dialled concurrently with Close is closed by the
// end of l.lifetime.
func (l *LazySession) Close() {
	l.mu.Lock()
	s, dialing := l.sess, l.dialing
	l.mu.Unlock()
	if s != nil {
		_ = s.Close() // its errors are the server's business once the run is over
	}
	l.end()
	if dialing != nil {
		select {
		case <-dialing:
		case <-time.After(closeWait):
		}
	}
}
