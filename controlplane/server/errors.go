package server

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"connectrpc.com/connect"

	"github.com/rbookhq/rbook-action/controlplane/store"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// The rbook error codes carried in every error's rbook.v1.ErrorInfo detail, spelled as in
// proto/rbook/v1/errors.proto (the first two are the specification's: docs/spec/playbooks.md, "Error codes").
const (
	CodeApprovalNotFound       = "E_APPROVAL_NOT_FOUND"
	CodeApprovalAlreadyDecided = "E_APPROVAL_ALREADY_DECIDED"
	CodeTokenInvalid           = "E_TOKEN_INVALID"
	CodeTokenExpired           = "E_TOKEN_EXPIRED"
	CodePlanDigestMismatch     = "E_PLAN_DIGEST_MISMATCH"
	CodeSelfApproval           = "E_SELF_APPROVAL"
	CodeRunNotFound            = "E_RUN_NOT_FOUND"
	CodeRunOwned               = "E_RUN_OWNED"
	CodeLeaseHeld              = "E_LEASE_HELD"
	CodeLeaseLost              = "E_LEASE_LOST"
	CodeRunFinal               = "E_RUN_FINAL"
	CodeRunCancelled           = "E_RUN_CANCELLED"
	CodeSeqConflict            = "E_SEQ_CONFLICT"
	CodeSeqGap                 = "E_SEQ_GAP"
	CodeChainBroken            = "E_CHAIN_BROKEN"
	CodeAttestationUnavailable = "E_ATTESTATION_UNAVAILABLE"
	CodeRetry                  = "E_RETRY"
	CodeInvalidArgument        = "E_INVALID_ARGUMENT"
	CodeUnauthenticated        = "E_UNAUTHENTICATED"
	CodePermissionDenied       = "E_PERMISSION_DENIED"
	CodeInternal               = "E_INTERNAL"
)

// rpcError builds the error a client sees: category code, a message that starts with the
// rbook code (so grpcurl output shows it even without details), and an ErrorInfo detail.
// Callers pass only text that is safe to show: never a token, a secret or SQL.
func rpcError(code connect.Code, rbookCode, format string, args ...any) *connect.Error {
	msg := rbookCode + ": " + fmt.Sprintf(format, args...)
	err := connect.NewError(code, errors.New(msg))
	if d, derr := connect.NewErrorDetail(&rbookv1.ErrorInfo{Code: rbookCode, Message: msg}); derr == nil {
		err.AddDetail(d)
	}
	return err
}

func invalidArg(format string, args ...any) *connect.Error {
	return rpcError(connect.CodeInvalidArgument, CodeInvalidArgument, format, args...)
}

// errorCode returns the rbook code of an error built by rpcError, or "".
func errorCode(err error) string {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return ""
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if info, ok := v.(*rbookv1.ErrorInfo); ok {
				return info.GetCode()
			}
		}
	}
	return ""
}

// storeError maps a store error that the handler did not handle itself. Store sentinel
// messages name fields and ids only; anything else is a storage failure whose text (which
// may hold SQL) goes to the server log, never to the client (ARCHITECTURE.md).
func (s *Server) storeError(ctx context.Context, op string, err error) *connect.Error {
	switch {
	case errors.Is(err, store.ErrInvalidArgument):
		return invalidArg("%s", storeMessage(err, store.ErrInvalidArgument))
	case errors.Is(err, store.ErrReadOnly):
		return rpcError(connect.CodePermissionDenied, CodePermissionDenied, "this view of the control-plane database is read-only; %s needs a running control plane", op)
	case errors.Is(err, store.ErrLeaseLost):
		return rpcError(connect.CodeFailedPrecondition, CodeLeaseLost,
			"%s: another executor resumed or took over the run since this one started it; this executor must stop writing (docs/decisions/leases-and-fencing.md)",
			storeMessage(err, store.ErrLeaseLost))
	case errors.Is(err, store.ErrNotOwner):
		return rpcError(connect.CodePermissionDenied, CodePermissionDenied,
			"%s is owned by another executor identity; executors write only their own runs", storeMessage(err, store.ErrNotOwner))
	case errors.Is(err, store.ErrClosed):
		return rpcError(connect.CodeUnavailable, CodeRetry, "the control plane is shutting down; retry")
	case errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeCanceled, err)
	case errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	}
	if ce := s.dbUnreachable(ctx, err); ce != nil {
		return ce // logged once per outage (dbhealth.go)
	}
	s.log.ErrorContext(ctx, "storage failure", "op", op, "err", err)
	return rpcError(connect.CodeInternal, CodeInternal, "storage failure during %s; details are in the server log", op)
}

// storeMessage strips the store's "store: <sentinel>: " prefix from a sentinel-wrapped
// error, leaving the part that names the field or id.
func storeMessage(err, sentinel error) string {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, sentinel.Error()+": "); ok {
		return rest
	}
	return strings.TrimPrefix(msg, "store: ")
}
