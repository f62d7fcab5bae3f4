package evidenceverify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/state"
	"github.com/rbookhq/rbook-action/internal/attest"
	"github.com/rbookhq/rbook-action/internal/evidencechain"
)

// Options are the inputs of `rbook evidence verify` (docs/evidence-verify.md, "Usage"): the
// pack file; the journal and the attestation ("" for the files beside the pack, named by its
// run id); a public key file (PEM, or the JSON of the control plane's keys document); the
// head kept elsewhere ("" for none).
type Options struct {
	Pack, Journal, Attestation, KeyFile, Head string
}

// Remote is a control plane the verification may read from (--control-plane): its
// published public keys, a run's attestation (nil and no error when it has none:
// E_ATTESTATION_UNAVAILABLE) and a run's transitions (GetRun). Where names it in messages.
type Remote interface {
	Where() string
	PublicKeys(ctx context.Context) ([]attest.PublicKey, error)
	Attestation(ctx context.Context, runID string) ([]byte, error)
	Transitions(ctx context.Context, runID string) ([]engine.Transition, error)
}

// RemoteDeadline bounds every call Load makes to a control plane together: one that does not
// answer, or pages without end, fails the verification as unreadable instead of hanging it.
const RemoteDeadline = 2 * time.Minute

// recordHeader is a Remote that also tells the run's current record on the control plane:
// its last seq and chain head (GetRun's run.last_seq and run.chain_head).
type recordHeader interface {
	RecordHead(ctx context.Context, runID string) (lastSeq int64, head string, err error)
}

// Load reads what o names, and from remote (nil: none) what no file gives: the keys
// always, the attestation when o.Attestation is "" and none lies beside the pack, the
// transitions when o.Journal is "" and no journal lies beside the pack. Errors are
// *InputError (exit code ExitUnreadable).
func Load(ctx context.Context, o Options, remote Remote) (*Input, error) {
	if o.Head != "" && !evidencechain.WellFormed(o.Head) {
		return nil, inputErr("--head %q: a chain head is \"sha256:\" and 64 lowercase hex digits, as the report and the job summary show it", o.Head)
	}
	data, entries, runID, err := readPack(o.Pack)
	if err != nil {
		return nil, err
	}
	in := &Input{PackPath: o.Pack, Pack: data, Entries: entries, RunID: runID, Head: o.Head}
	if remote == nil {
		return in, in.load(ctx, o, nil)
	}
	ctx, cancel := context.WithTimeout(ctx, RemoteDeadline)
	defer cancel()
	if err := in.load(ctx, o, remote); err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, inputErr("%s did not answer within %v: %v. Check that it is up and is an rbook control plane, or verify offline with --journal, --attestation and --key", remote.Where(), RemoteDeadline, err)
		}
		return nil, err
	}
	return in, nil
}

// load reads the journal, the attestation, the keys and, from a remote that tells it, the
// control plane's current record of the run.
func (in *Input) load(ctx context.Context, o Options, remote Remote) error {
	if err := in.loadJournal(ctx, o, remote); err != nil {
		return err
	}
	if err := in.loadAttestation(ctx, o, remote); err != nil {
		return err
	}
	if err := in.loadKeys(ctx, o, remote); err != nil {
		return err
	}
	if rh, ok := remote.(recordHeader); ok {
		seq, head, err := rh.RecordHead(ctx, in.RunID)
		if err != nil {
			return inputErr("the record of run %s cannot be read from %s: %v", in.RunID, remote.Where(), err)
		}
		in.Record = &Record{From: remote.Where(), LastSeq: seq, Head: head}
	}
	return nil
}

// loadJournal reads the journal o names, else the one beside the pack; the control plane's
// record replaces the one beside the pack when there is none, or when it starts after seq 1
// (a run resumed from another folder), and remote is given.
func (in *Input) loadJournal(ctx context.Context, o Options, remote Remote) error {
	path := o.Journal
	if path == "" {
		path = beside(o.Pack, in.RunID, state.JournalSuffix)
	}
	ts, torn, err := readJournal(path, in.RunID)
	partial := err == nil && len(ts) > 0 && ts[0].Seq > 1
	if o.Journal == "" && remote != nil && (err != nil || partial) {
		if ts, err = remote.Transitions(ctx, in.RunID); err != nil {
			return inputErr("the transitions of run %s cannot be read from %s: %v", in.RunID, remote.Where(), err)
		}
		in.Transitions, in.JournalFrom = ts, "the control plane's record"
		return nil
	}
	in.Transitions, in.JournalFrom = ts, path
	if torn != "" {
		in.Notes = append(in.Notes, torn)
	}
	return err
}

func (in *Input) loadAttestation(ctx context.Context, o Options, remote Remote) error {
	path := o.Attestation
	if path == "" {
		path = beside(o.Pack, in.RunID, attestationSuffix)
	}
	env, err := readOptional(path, o.Attestation != "", "attestation", MaxAttestationBytes)
	if err != nil || env != nil {
		in.Envelope, in.EnvelopeFrom = env, path
		return err
	}
	if remote == nil {
		return nil
	}
	if env, err = remote.Attestation(ctx, in.RunID); err != nil {
		return inputErr("the attestation of run %s cannot be read from %s: %v", in.RunID, remote.Where(), err)
	}
	in.Envelope, in.EnvelopeFrom = env, "the control plane's attestation"
	return nil
}

func (in *Input) loadKeys(ctx context.Context, o Options, remote Remote) error {
	switch {
	case o.KeyFile != "":
		data, err := readLimited(o.KeyFile, "key file", MaxKeyFileBytes)
		if err != nil {
			return inputErr("--key: %v", err)
		}
		if bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
			in.Keys, err = attest.ParseKeysDocument(data)
		} else {
			// A signing key file (the embedded control plane's .rbook/signing-key.pem) gives
			// its public half: only that is used.
			in.Keys, err = attest.ParseVerificationKeys(data)
		}
		if err != nil {
			return inputErr("--key %s: %v (give the control plane's public key as PEM, e.g. from `openssl pkey -in signing-key.pem -pubout -out signing-key.pub.pem`, or the JSON it serves at %s)", o.KeyFile, err, attest.KeysPath)
		}
		in.KeysFrom = "key file " + o.KeyFile
	case remote != nil:
		keys, err := remote.PublicKeys(ctx)
		if errors.Is(err, attest.ErrNoKeys) || err == nil && len(keys) == 0 {
			// The checks that need no signature still run; the outcome is unsigned.
			in.NoKeys = remote.Where() + " publishes no public key: it has no signing key (`rbook serve --signing-key FILE`); give the key that signed the attestation with --key FILE (an embedded run's: .rbook/signing-key.pem)"
			return nil
		}
		if err != nil {
			return inputErr("the public keys of %s cannot be read: %v", remote.Where(), err)
		}
		in.Keys, in.KeysFrom = keys, fmt.Sprintf("the keys %s publishes", remote.Where())
	}
	return nil
}
