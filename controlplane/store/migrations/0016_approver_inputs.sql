-- 0016: approver inputs (docs/approver-inputs.md). inputs_json is the gate's form as the
-- executor declared it when the gate opened: a JSON array of internal/gateinputs.Field, ''
-- for none. input_values_json is the JSON object of field name to value the gate was approved
-- with (validated, defaults applied; those of the deciding vote), '' until then and for a
-- rejection. approval_votes.input_values is each vote's own values, '' for none.
ALTER TABLE playbook_approvals ADD COLUMN inputs_json TEXT NOT NULL DEFAULT ''
    CHECK (inputs_json = '' OR (json_valid(inputs_json) AND json_type(inputs_json) = 'array'));
ALTER TABLE playbook_approvals ADD COLUMN input_values_json TEXT NOT NULL DEFAULT ''
    CHECK (input_values_json = '' OR (json_valid(input_values_json) AND json_type(input_values_json) = 'object'));
ALTER TABLE approval_votes ADD COLUMN input_values TEXT NOT NULL DEFAULT ''
    CHECK (input_values = '' OR (json_valid(input_values) AND json_type(input_values) = 'object'));
