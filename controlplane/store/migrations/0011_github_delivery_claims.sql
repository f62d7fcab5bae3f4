-- 0011: a webhook delivery's row is a claim with a lease (docs/decisions/delivery-claims.md).
-- The replica that inserts a delivery's row acts on it; status 'claimed' until its effect is
-- written, then 'done'. claimed_by is the claimer's origin (the Store's random id), claimed_at
-- when the claim was taken, claimed_until when its lease ends: a replica killed after claiming
-- leaves a 'claimed' row whose lease expires, and the next replica that receives the delivery
-- takes it over (one conditional UPDATE), so a redelivery is not ignored forever. A 'done' row
-- is a processed delivery: a redelivery of it changes nothing. Rows written before this
-- migration were processed: 'done'. processed_at is when the row was last written (the claim,
-- then its completion).
ALTER TABLE github_deliveries ADD COLUMN status TEXT NOT NULL DEFAULT 'done' CHECK (status IN ('claimed', 'done'));
ALTER TABLE github_deliveries ADD COLUMN claimed_by TEXT;
ALTER TABLE github_deliveries ADD COLUMN claimed_at TEXT;
ALTER TABLE github_deliveries ADD COLUMN claimed_until TEXT;
