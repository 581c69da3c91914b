-- WriteScope database, schema version 1.
-- Hardware profiles (datasheet or calibrated), the hosts they were measured on,
-- calibration runs with their raw samples and fits. Every stored number carries a source:
-- 'datasheet' (vendor specification), 'measured' (timed on a machine), 'fitted' (GSL fit
-- of measured samples) or 'modeled' (an assumption or a value derived by a model).
-- Applied by store/store.c inside one transaction, which then sets PRAGMA user_version = 1.

CREATE TABLE hosts (
    id            INTEGER PRIMARY KEY,
    fingerprint   TEXT NOT NULL UNIQUE,    -- hash of the fields below
    cpu_model     TEXT NOT NULL,
    cpu_cores     INTEGER NOT NULL,
    mem_bytes     REAL NOT NULL,
    isa           TEXT NOT NULL,           -- SIMD flags present, space separated
    gpu_name      TEXT,                    -- NULL when no GPU was seen
    gpu_cc        TEXT,
    gpu_mem_bytes REAL,
    gpu_driver    TEXT,
    pcie_link     TEXT,
    first_seen    TEXT NOT NULL            -- UTC, ISO 8601
);

CREATE TABLE calib_runs (
    id           INTEGER PRIMARY KEY,
    host_id      INTEGER NOT NULL REFERENCES hosts(id),
    tool_version TEXT NOT NULL,
    mode         TEXT NOT NULL,            -- quick | default | ...
    scope        TEXT NOT NULL,            -- cpu | gpu | link | all
    started_at   TEXT NOT NULL,
    finished_at  TEXT NOT NULL,
    note         TEXT NOT NULL DEFAULT ''
);

CREATE TABLE samples (
    id        INTEGER PRIMARY KEY,
    run_id    INTEGER NOT NULL REFERENCES calib_runs(id) ON DELETE CASCADE,
    device    TEXT NOT NULL,               -- cpu | gpu | link
    op        TEXT NOT NULL,               -- e.g. attn, membw_read, h2d, gemm
    dtype     TEXT NOT NULL DEFAULT '',
    attn_kind TEXT NOT NULL DEFAULT '',    -- gqa | mla | mla-sparse | '' for non-attention
    params    TEXT NOT NULL DEFAULT '{}',  -- JSON: ctx, batch, threads, bytes, ...
    flops     REAL NOT NULL,
    bytes     REAL NOT NULL,
    repeats   INTEGER NOT NULL CHECK (repeats > 0),
    t_median  REAL NOT NULL CHECK (t_median >= 0),  -- seconds
    t_min     REAL,
    t_max     REAL
);
CREATE INDEX samples_by_key ON samples(run_id, device, op, dtype, attn_kind);

CREATE TABLE fits (
    id               INTEGER PRIMARY KEY,
    run_id           INTEGER NOT NULL REFERENCES calib_runs(id) ON DELETE CASCADE,
    device           TEXT NOT NULL,
    op               TEXT NOT NULL,
    dtype            TEXT NOT NULL DEFAULT '',
    attn_kind        TEXT NOT NULL DEFAULT '',
    form             TEXT NOT NULL,        -- roofline | transfer | factor
    c0               REAL, c0_se REAL,     -- fixed cost, seconds
    peak_flops       REAL, peak_flops_se REAL,
    bandwidth        REAL, bandwidth_se REAL,   -- bytes/s
    factor           REAL, factor_se REAL,
    r2               REAL,
    heldout_mape_pct REAL,
    n_samples        INTEGER NOT NULL,
    good             INTEGER NOT NULL CHECK (good IN (0, 1)),
    note             TEXT NOT NULL DEFAULT ''
);

CREATE TABLE profiles (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,      -- a100-40gb-pcie, host:<fingerprint>, gpu:<name>
    kind        TEXT NOT NULL CHECK (kind IN ('gpu', 'host')),
    description TEXT NOT NULL,
    source      TEXT NOT NULL CHECK (source IN ('datasheet', 'measured', 'fitted', 'modeled')),
    host_id     INTEGER REFERENCES hosts(id),
    run_id      INTEGER REFERENCES calib_runs(id),
    created_at  TEXT NOT NULL
);

CREATE TABLE profile_params (
    profile_id INTEGER NOT NULL REFERENCES profiles(id) ON DELETE CASCADE,
    key        TEXT NOT NULL,
    value      REAL NOT NULL,
    unit       TEXT NOT NULL,
    source     TEXT NOT NULL CHECK (source IN ('datasheet', 'measured', 'fitted', 'modeled')),
    reference  TEXT NOT NULL,             -- document, formula or fit id the value comes from
    PRIMARY KEY (profile_id, key)
);
