-- Schema version 11: where the measurements of an imported calibration came from (`writescope
-- calib import`): one row per file a run read, saying what was measured, by whom, with which
-- tool, on which GPU and at which precision, and the file itself (path as given, size, SHA-256,
-- rows read) with its licence. A run of the calibrator measures this machine and has none.
CREATE TABLE calib_sources (
    id          INTEGER PRIMARY KEY,
    run_id      INTEGER NOT NULL REFERENCES calib_runs(id) ON DELETE CASCADE,
    path        TEXT NOT NULL,
    sha256      TEXT NOT NULL,             -- 64 hex digits
    bytes       INTEGER NOT NULL,
    rows        INTEGER NOT NULL,          -- operator rows read from the file
    what        TEXT NOT NULL,             -- e.g. 'attention: decode and prefill (...)'
    measured_by TEXT NOT NULL,             -- e.g. 'Vidur (microsoft/vidur)'
    tool        TEXT NOT NULL,             -- e.g. 'PyTorch Kineto profiler'
    gpu         TEXT NOT NULL,             -- the device, as the datasheet profile names it
    dtype       TEXT NOT NULL,
    licence     TEXT NOT NULL
);
CREATE INDEX calib_sources_by_run ON calib_sources(run_id);
