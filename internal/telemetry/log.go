package telemetry

import (
	"context"
	"log/slog"
	"sync"

	"go.opentelemetry.io/otel/trace"
)

// The log fields LogHandler adds (docs/tracing.md, "Logs").
const (
	LogRunID      = "run_id"
	LogStep       = "step"
	LogApprovalID = "approval_id"
	LogTraceID    = "trace_id"
	LogSpanID     = "span_id"
)

// Fields are the ids of what a request is about: its run, step and approval. A request's
// handler learns them as it reads the request (and the approval id perhaps only from its
// answer), so they are a holder in the context that is filled in while the request goes on;
// every line logged with that context carries them. Safe for concurrent use.
type Fields struct {
	mu                      sync.Mutex
	runID, step, approvalID string
}

type fieldsKey struct{}

// WithFields returns ctx with a new, empty Fields, and that Fields.
func WithFields(ctx context.Context) (context.Context, *Fields) {
	f := &Fields{}
	return context.WithValue(ctx, fieldsKey{}, f), f
}

// FieldsFrom returns ctx's Fields, nil when it has none (Set on nil does nothing).
func FieldsFrom(ctx context.Context) *Fields {
	f, _ := ctx.Value(fieldsKey{}).(*Fields)
	return f
}

// Set records the ids that are not empty; empty ones keep what was set before.
func (f *Fields) Set(runID, step, approvalID string) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if runID != "" {
		f.runID = runID
	}
	if step != "" {
		f.step = step
	}
	if approvalID != "" {
		f.approvalID = approvalID
	}
}

// Get returns the ids set so far.
func (f *Fields) Get() (runID, step, approvalID string) {
	if f == nil {
		return "", "", ""
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runID, f.step, f.approvalID
}

// LogHandler wraps a slog.Handler: every record logged with a context gets run_id, step and
// approval_id from the context's Fields (unless the call gave that key itself) and trace_id
// and span_id from its span, when the span context is valid (a remote parent's counts, so a
// control plane that exports nothing still logs the executor's trace id).
type LogHandler struct{ next slog.Handler }

// NewLogHandler returns next wrapped in a LogHandler.
func NewLogHandler(next slog.Handler) *LogHandler { return &LogHandler{next: next} }

// Enabled reports whether next handles level.
func (h *LogHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle adds the context's ids to r and passes it to next.
func (h *LogHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx == nil {
		return h.next.Handle(ctx, r)
	}
	var add []slog.Attr
	if runID, step, approvalID := FieldsFrom(ctx).Get(); runID != "" || step != "" || approvalID != "" {
		have := map[string]bool{}
		r.Attrs(func(a slog.Attr) bool { have[a.Key] = true; return true })
		for _, kv := range [...][2]string{{LogRunID, runID}, {LogStep, step}, {LogApprovalID, approvalID}} {
			if kv[1] != "" && !have[kv[0]] {
				add = append(add, slog.String(kv[0], kv[1]))
			}
		}
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		add = append(add, slog.String(LogTraceID, sc.TraceID().String()), slog.String(LogSpanID, sc.SpanID().String()))
	}
	if len(add) > 0 {
		r = r.Clone()
		r.AddAttrs(add...)
	}
	return h.next.Handle(ctx, r)
}

// WithAttrs returns the handler with attrs added by next.
func (h *LogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &LogHandler{next: h.next.WithAttrs(attrs)}
}

// WithGroup returns the handler with next's group name.
func (h *LogHandler) WithGroup(name string) slog.Handler {
	return &LogHandler{next: h.next.WithGroup(name)}
}
