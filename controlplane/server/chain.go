package server

import (
	"connectrpc.com/connect"

	"github.com/rbookhq/rbook-action/controlplane/store"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/evidencechain"
)

// checkSealed copies the wire transition p's prev_hash and hash into t (its conversion) and
// checks the hash against p's content (docs/evidence-chain.md, "Verifying a chain"); the
// store checks that prev_hash continues the run's chain. A transition without hashes (an
// older executor) passes here. Errors: E_INVALID_ARGUMENT for a hash that is not
// "sha256:" + 64 lowercase hex, E_CHAIN_BROKEN (FAILED_PRECONDITION) naming the seq when the
// hash does not match.
func checkSealed(p *rbookv1.Transition, t *store.Transition) error {
	t.PrevHash, t.Hash = p.GetPrevHash(), p.GetHash()
	for _, f := range []struct{ name, v string }{{"prev_hash", t.PrevHash}, {"hash", t.Hash}} {
		if f.v != "" && !evidencechain.WellFormed(f.v) {
			return invalidArg("transition.%s %q is not sha256: and 64 lowercase hex digits", f.name, truncate(f.v, 80))
		}
	}
	if t.Hash == "" {
		return nil
	}
	if got := evidencechain.HashOf(linkOf(*t, p.GetEvidence().GetTimestampUtc())); got != t.Hash {
		return rpcError(connect.CodeFailedPrecondition, CodeChainBroken,
			"run %s seq %d: hash %s does not match the transition's content (%s); the executor must send the transition as it sealed it",
			t.RunID, t.Seq, t.Hash, got)
	}
	return nil
}

// linkOf is t as the chain encodes it, in the engine's words (the store keeps the same
// words); evidenceTime is the entry's timestamp_utc as the executor sent it.
func linkOf(t store.Transition, evidenceTime string) evidencechain.Link {
	l := evidencechain.Link{RunID: t.RunID, Seq: t.Seq, Kind: string(t.Kind), Time: t.At, StepIndex: t.StepIndex,
		StepName: t.StepName, StepType: t.StepType, RunStatus: string(t.RunStatus), LastDeployName: t.LastDeployName,
		RollbackFor: t.RollbackFor, Message: t.Message, PrevHash: t.PrevHash, Hash: t.Hash}
	if e := t.Evidence; e != nil {
		l.Evidence = &evidencechain.Entry{StepName: e.StepName, Type: e.Type, Input: e.Input, Output: e.Output,
			Status: string(e.Status), TimestampUTC: evidenceTime, SourceInput: e.SourceInput}
	}
	return l
}
