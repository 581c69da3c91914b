-- Schema version 4: simulation results. A run of `writescope sim` (one policy on one
-- workload, model and pair of hardware profiles) with its totals, one row per request and
-- one per batch step. Every figure here is modeled (label), and names the profiles it came
-- from. A run is written in one transaction with its requests and steps (store/simdb.c).
-- Times are seconds of simulated time unless the name says otherwise; NULL is a value
-- that does not exist (a request that never produced a token has no TTFT).

CREATE TABLE sim_runs (
    id            INTEGER PRIMARY KEY,
    started_at    TEXT NOT NULL,            -- UTC, ISO 8601 (wall clock)
    tool_version  TEXT NOT NULL,
    model         TEXT NOT NULL,            -- model name or config path
    gpu_profile   TEXT NOT NULL,            -- profile names as loaded (store/profile.h)
    host_profile  TEXT NOT NULL,
    policy        TEXT NOT NULL,            -- writescope | gpu-only | ktrans | stream | ...
    workload      TEXT NOT NULL CHECK (workload IN ('closed', 'trace', 'generator')),
    batch         INTEGER NOT NULL,         -- closed: B; otherwise the batching cap
    prompt_tokens INTEGER,                  -- closed: N
    output_tokens INTEGER,                  -- closed: M
    trace_path    TEXT NOT NULL DEFAULT '',
    trace_format  TEXT NOT NULL DEFAULT '',
    generator     TEXT NOT NULL DEFAULT '', -- generator settings (arrivals, lengths, rate)
    detail        TEXT NOT NULL,            -- step | layer
    seed          INTEGER NOT NULL,
    params        TEXT NOT NULL DEFAULT '{}', -- JSON: every other setting of the run
    wall_s        REAL,                     -- wall-clock seconds the simulation took
    events        INTEGER NOT NULL DEFAULT 0, -- engine events processed
    sim_s         REAL,                     -- simulated time from first arrival to last end
    requests      INTEGER NOT NULL DEFAULT 0,
    completed     INTEGER NOT NULL DEFAULT 0,
    oom           INTEGER NOT NULL DEFAULT 0,
    tokens_out    INTEGER NOT NULL DEFAULT 0,
    tokens_per_s  REAL,
    ttft_p50      REAL, ttft_p90 REAL, ttft_p99 REAL,
    tpot_p50      REAL, tpot_p90 REAL, tpot_p99 REAL,
    slo_ttft      REAL,                     -- NULL: no TTFT objective
    slo_tpot      REAL,
    slo_met       INTEGER NOT NULL DEFAULT 0, -- completed requests within both objectives
    goodput       REAL,                     -- slo_met per simulated second
    label         TEXT NOT NULL DEFAULT 'modeled' CHECK (label = 'modeled')
);

CREATE TABLE sim_requests (
    run_id    INTEGER NOT NULL REFERENCES sim_runs(id) ON DELETE CASCADE,
    idx       INTEGER NOT NULL,             -- position in the workload, from 0
    arrival_s REAL NOT NULL,
    prompt    INTEGER NOT NULL,             -- tokens
    output    INTEGER NOT NULL,             -- tokens asked for
    ttft_s    REAL,                         -- arrival to first output token
    tpot_s    REAL,                         -- mean time per output token after the first
    e2e_s     REAL,                         -- arrival to last output token
    outcome   TEXT NOT NULL CHECK (outcome IN ('done', 'oom', 'unfinished')),
    PRIMARY KEY (run_id, idx)
);

CREATE TABLE sim_steps (
    run_id     INTEGER NOT NULL REFERENCES sim_runs(id) ON DELETE CASCADE,
    idx        INTEGER NOT NULL,            -- batch step, from 0
    t_start    REAL NOT NULL,
    t_end      REAL NOT NULL,
    batch      INTEGER NOT NULL,            -- requests in the step
    tokens     INTEGER NOT NULL,            -- tokens the step processed (prefill + decode)
    context    INTEGER NOT NULL DEFAULT 0,  -- context tokens attended over, all requests
    r_star     REAL,                        -- the policy's target CPU share r*
    r_real     REAL,                        -- the share the cache actually had
    busy_gpu   REAL, busy_h2d REAL, busy_d2h REAL, busy_cpu REAL, -- busy seconds in the step
    busy_other TEXT NOT NULL DEFAULT '{}',  -- JSON: other resources' busy seconds
    PRIMARY KEY (run_id, idx)
);
