-- Schema version 2: a fit records which roofline rate it held fixed at a measured value
-- (only one of P and W is identifiable from samples of one arithmetic intensity) and which
-- side of the roofline its samples sit on.
ALTER TABLE fits ADD COLUMN p_fixed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE fits ADD COLUMN w_fixed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE fits ADD COLUMN compute_bound INTEGER NOT NULL DEFAULT 0;
