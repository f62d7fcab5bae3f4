package evidenceverify

// Help is the --help text of `rbook evidence verify`, its exit codes included (the CLI keeps
// only its wiring; docs/evidence-verify.md says the same at more length).
const Help = `Verify a run's evidence as an auditor would, without trusting whoever handed it over
(docs/evidence-verify.md). PACK is the run's <run_id>.evidence.json; the journal
(<run_id>.journal.jsonl) and the attestation (<run_id>.attestation.json) are read from beside
it unless --journal or --attestation names them.

It checks, printing one line per check: the journal's hash chain from seq 1 to its head; that
the pack's entries are the chain's, in order; the head against --head (a head kept
elsewhere: a job summary, a ticket); the attestation's signature with --key or the keys the
--control-plane publishes; that the attestation is of this pack (its SHA-256), this chain
(its head) and this run; that every gate decision of the chain is the attestation's and
back; and that each approved gate met its recorded policy (M distinct people, four eyes). A
gate approved by an identity nobody authenticated (unverified:<name>) gets a "·" line: its
approvers are not proved, and the exit code stays 0. The first failing entry is named: its
seq, its step and why. --key also takes a signing key file (.rbook/signing-key.pem after
'rbook run'); only its public half is used.

With --control-plane URL, the public keys come from URL/.well-known/rbook/keys, and the
attestation and the chain from the control plane when no file gives them ($RBOOK_TOKEN,
$RBOOK_CA_FILE, $RBOOK_CLIENT_CERT and $RBOOK_CLIENT_KEY as for every command), and the
journal must end where the control plane's record of the run does. Calls to the control plane
share a deadline of 2 minutes.

Exit codes:
  0  verified: every check passed, the signature included (a "·" policy line keeps 0)
  1  a check failed: the evidence was changed, or is not the run's the attestation signed
  2  bad usage, or an input cannot be read (no journal, a control plane that does not answer)
  3  the chain and the pack agree, but nothing signed was checked: no attestation, no key, or a
     --control-plane without a signing key`

// Examples are the --help examples of `rbook evidence verify`.
const Examples = `  rbook evidence verify .rbook/RBOOK-….evidence.json --key rbook-signing.pub.pem
  rbook evidence verify RBOOK-….evidence.json --control-plane https://rbook.example.com
  rbook evidence verify RBOOK-….evidence.json --key cp.pem --head sha256:3f…   # the head from the job summary`
