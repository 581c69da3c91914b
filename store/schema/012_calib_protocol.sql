-- Schema version 12: how a calibration measured on a shared host, which fits it kept, and
-- how a validation judges each quantity against the noise floor.
-- A sample keeps the robust estimate its fit used (t_est: the median of the fastest half of
-- its repeats) beside the median, and its spread (the interquartile range of its repeats over
-- t_est, percent). A fit keeps the spread of its samples (their median spread, percent), the fallback the cost model
-- would use without it and that fallback's error on the same samples (a fit is used only when
-- it is better), and, for the piecewise form, the pieces below its top one (a JSON array of
-- {upto, c0, peak_flops, bandwidth}, upto the intensity in flop/byte each applies to). A run keeps its reference probe: how far the probe drifted between its
-- first and its slowest repeat (percent), whether the run was measured again for it, and
-- whether it is flagged as noisy (flagged runs are stored but none of their fits is used),
-- and the probe's read rate (B/s, the median of its fastest half): what `validate` holds the host against later.
ALTER TABLE samples ADD COLUMN t_est REAL;
ALTER TABLE samples ADD COLUMN spread_pct REAL;
ALTER TABLE fits ADD COLUMN spread_pct REAL;
ALTER TABLE fits ADD COLUMN fallback TEXT NOT NULL DEFAULT '';
ALTER TABLE fits ADD COLUMN fallback_mape_pct REAL;
ALTER TABLE fits ADD COLUMN pieces TEXT NOT NULL DEFAULT '';
ALTER TABLE calib_runs ADD COLUMN drift_pct REAL;
ALTER TABLE calib_runs ADD COLUMN remeasured INTEGER NOT NULL DEFAULT 0;
ALTER TABLE calib_runs ADD COLUMN flagged INTEGER NOT NULL DEFAULT 0;
ALTER TABLE calib_runs ADD COLUMN probe_bw REAL;
-- A validation keeps a verdict per quantity against the runtime's own noise floor: within
-- it, or the term of the cost model most off.
ALTER TABLE validate_stats ADD COLUMN verdict TEXT NOT NULL DEFAULT '';
