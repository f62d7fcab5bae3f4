package main

// Playbook words for what rbook shows: the -o json result's playbook fields and the help of
// the playbook commands. A runbook run keeps every string it had; only playbook runs get
// these.

// playbookCPHelp is cpHelp for the playbook commands: the embedded control plane is the one
// of an 'rbook playbook run' in progress.
const playbookCPHelp = `Which control plane: --control-plane URL, else $RBOOK_CONTROL_PLANE, else the embedded
one of an 'rbook playbook run' in progress in this folder (its address is in
.rbook/controlplane.url). With auth on (rbook serve --auth-file), the bearer token comes from
$RBOOK_TOKEN. The embedded control plane lives as long as that run's process: once the run
has ended (or is killed), approve, reject and cancel serve this folder's
.rbook/controlplane.db themselves, on loopback, for the command alone (stderr says so); with
'rbook serve' the control plane stays up. A decided token gets E_APPROVAL_ALREADY_DECIDED.
On the embedded control plane an approval id ("a-…") works without auth from this folder
(its .rbook/local-approver-key, 0600, shows you own the run).`

// playbookHistoryHelp is historyHelp for rbook playbook status.
const playbookHistoryHelp = `Which control plane: --control-plane URL, else $RBOOK_CONTROL_PLANE, else the embedded
one of an 'rbook playbook run' in progress in this folder (its address is in
.rbook/controlplane.url). With auth on (rbook serve --auth-file), the bearer token comes from
$RBOOK_TOKEN. When none of those is running, the history of this folder's embedded runs is
read from .rbook/controlplane.db, read-only (stderr says so). It reads only the control
plane, never the run's state file: a run with --control-plane off is not there (read its
state file, report or 'rbook playbook run -o json' instead).`

// decideReasonExample is the --reason of the approve and reject examples: a reason that fits
// the verb.
func decideReasonExample(approve bool) string {
	if approve {
		return "build and tests are green"
	}
	return "wrong version: 2026.4.90 is already on npm"
}
