package state

import "fmt"

// CloseFromRecord makes the state file at path, which holds the unfinished run local (as
// Read returned it), hold record instead: the same run as its control plane recorded it, final
// there because another executor finished it (a `rbook resume` in another folder, the winner
// of two concurrent resumes). The control plane's record is the run's truth once it is final:
// no executor can add to it (the lease and fencing), so the local copy takes its status,
// transitions and evidence rather than ever disagreeing with it.
//
// The file keeps this folder's executor fields (owner id and workspace, lease epoch, the
// control plane it reports to); the outbox is dropped, because a final run on the control
// plane refuses every further transition. The evidence pack file is written first, as for
// any final write (a final state never lacks its pack); a pack that ran ahead of local is
// this run's own (see WriteEvidence). The caller holds the state file's lock. Errors: a
// record of another run, or one that is not final; *EvidenceTakenError; *NotWritableError.
func CloseFromRecord(path string, local, record *State) error {
	if record.RunID != local.RunID {
		return fmt.Errorf("the control plane's record is of run %s, not %s", record.RunID, local.RunID)
	}
	if !record.RunStatus.Final() {
		return fmt.Errorf("run %s is %s on the control plane, not final", record.RunID, record.RunStatus)
	}
	record.OwnerID, record.OwnerWorkspace, record.LeaseEpoch = local.OwnerID, local.OwnerWorkspace, local.LeaseEpoch
	record.ControlPlane, record.ControlPlaneEmbedded = local.ControlPlane, local.ControlPlaneEmbedded
	record.Outbox = nil
	record.read, record.readPack = local.read, min(local.readPack, len(record.EvidencePack))
	r := &FileRecorder{Path: path, State: record, durable: true} // no journal line backs this write
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.write()
}
