package server

import (
	"context"
	"time"
)

// outboxLoop is the wake-up and timer loop shared by the control plane's outbox deliverers
// (GitHub protection rule verdicts, github_gates.go; notifications, notifications.go) and
// the gate deadline loop (server.go): it
// runs a pass at start, whenever poke is called (a store change that may have queued work)
// and when the earliest retry the last pass reported comes due, until ctx ends.
type outboxLoop struct {
	wake chan struct{}
}

func newOutboxLoop() outboxLoop { return outboxLoop{wake: make(chan struct{}, 1)} }

// poke asks for a pass soon; it never blocks (pokes before the pass starts merge).
func (l outboxLoop) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// run calls pass until ctx ends and closes done then. pass delivers what is due and returns
// how long until its next retry (ok=false: nothing is waiting for one).
func (l outboxLoop) run(ctx context.Context, done chan<- struct{}, pass func(ctx context.Context) (wait time.Duration, ok bool)) {
	defer close(done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		wait, ok := pass(ctx)
		var fire <-chan time.Time
		if ok {
			timer.Reset(wait)
			fire = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case <-l.wake:
		case <-fire:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// retryDelay is the back-off after failures consecutive failed attempts (at least 1):
// base·2^(failures-1), at most limit.
func retryDelay(base time.Duration, failures int, limit time.Duration) time.Duration {
	d := base << min(max(failures-1, 0), 20)
	if d <= 0 || d > limit {
		return limit
	}
	return d
}
