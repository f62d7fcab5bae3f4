-- 0015: people (docs/people.md). A vote records the person of the people directory whose
-- identity cast it, '' for an identity with no person (it counts as itself). A gate's person
-- is who decided it as people, as approver is as identities: the approving people (person
-- ids, an identity with no person as itself) joined with ", " in vote order, or the one who
-- rejected; '' until decided and for decisions no person made.
ALTER TABLE approval_votes ADD COLUMN person TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE playbook_approvals ADD COLUMN person TEXT COLLATE "C" NOT NULL DEFAULT '';
