-- Schema version 7: `writescope validate`, the live runtime compared with the simulator on
-- one workload. A validation links the runtime run it compared (run_runs; the first of its
-- repeats, the others' ids in params) and the simulation (sim_runs). Per quantity: the mean
-- and p95 absolute percentage error of the simulator against the runtime and, with repeats,
-- the runtime against itself (the noise floor). Per point: the measured and the predicted
-- value. Per cost-model term: what the runtime measured, what the model predicted for the
-- same tokens, and the term's share of the step. measured_source says what the "measured"
-- side is: measured (CPU), mixed (a CPU-measured and GPU-modeled timeline) or modeled (the
-- GPU half under gpu = modeled:<profile>). Written in one transaction (store/validatedb.c).

CREATE TABLE validate_runs (
    id            INTEGER PRIMARY KEY,
    started_at    TEXT NOT NULL,             -- UTC, ISO 8601
    tool_version  TEXT NOT NULL,
    model         TEXT NOT NULL,
    gpu           TEXT NOT NULL,             -- modeled:<profile> | cuda:<device>
    gpu_source    TEXT NOT NULL CHECK (gpu_source IN ('modeled', 'measured')),
    host_profile  TEXT NOT NULL,
    policy        TEXT NOT NULL,
    batch         INTEGER NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    layers        INTEGER NOT NULL,
    repeats       INTEGER NOT NULL,          -- runtime runs
    warmup        INTEGER NOT NULL DEFAULT 0, -- first decode steps of each run left out of the statistics
    run_id        INTEGER REFERENCES run_runs(id) ON DELETE SET NULL,
    sim_run_id    INTEGER REFERENCES sim_runs(id) ON DELETE SET NULL,
    calib_run_id  INTEGER REFERENCES calib_runs(id) ON DELETE SET NULL, -- --calibrate's run
    verdict       TEXT NOT NULL DEFAULT '',  -- which cost-model term is off, if any
    params        TEXT NOT NULL DEFAULT '{}' -- JSON: repeats' run ids and other settings
);

CREATE TABLE validate_stats (
    validate_id     INTEGER NOT NULL REFERENCES validate_runs(id) ON DELETE CASCADE,
    quantity        TEXT NOT NULL,           -- step_time | cpu_attn | experts | cpu_share | gpu_half
    scope           TEXT NOT NULL CHECK (scope IN ('step', 'layer')),
    measured_source TEXT NOT NULL CHECK (measured_source IN ('measured', 'mixed', 'modeled')),
    unit            TEXT NOT NULL,           -- s | 1
    n               INTEGER NOT NULL,        -- points compared (all repeats)
    mean_ape        REAL, p95_ape REAL,      -- simulator vs runtime, percent
    noise_mean_ape  REAL, noise_p95_ape REAL, -- runtime vs its first run, percent (NULL: 1 run)
    mean_measured   REAL, mean_predicted REAL,
    PRIMARY KEY (validate_id, quantity)
);

CREATE TABLE validate_points (
    validate_id INTEGER NOT NULL REFERENCES validate_runs(id) ON DELETE CASCADE,
    rep         INTEGER NOT NULL,            -- runtime repeat, from 0
    quantity    TEXT NOT NULL,
    step        INTEGER NOT NULL,            -- decode step, from 0
    layer       INTEGER NOT NULL,            -- -1 for a per-step quantity
    measured    REAL,
    predicted   REAL,
    PRIMARY KEY (validate_id, rep, quantity, step, layer)
);

CREATE TABLE validate_terms (
    validate_id    INTEGER NOT NULL REFERENCES validate_runs(id) ON DELETE CASCADE,
    term           TEXT NOT NULL,            -- e.g. cpu_attn.per_token, experts.gemm, engine
    measured       REAL,                     -- s per step, or the term's rate
    predicted      REAL,
    unit           TEXT NOT NULL,
    error_pct      REAL,                     -- (measured - predicted) / predicted
    step_share_pct REAL,                     -- (measured - predicted) / measured step time
    note           TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (validate_id, term)
);
