-- Schema version 5: results of the live runtime (`writescope run`). A run is one closed batch
-- served by the decode engine under one policy, with its totals, one row per decode step
-- (the same columns as sim_steps, so runs and simulations compare column by column) and
-- one per (step, layer). Every time says where it came from: CPU times are measured; GPU
-- times are measured (gpu = 'cuda:<device>') or modeled by the cost model (gpu =
-- 'modeled:<profile>', gpu_source = 'modeled'). The cost model's predictions sit beside
-- the measurements. A run is written in one transaction with its rows (store/rundb.c).

CREATE TABLE run_runs (
    id             INTEGER PRIMARY KEY,
    started_at     TEXT NOT NULL,            -- UTC, ISO 8601
    tool_version   TEXT NOT NULL,
    model          TEXT NOT NULL,
    gpu            TEXT NOT NULL,            -- modeled:<profile> | cuda:<device>
    gpu_source     TEXT NOT NULL CHECK (gpu_source IN ('modeled', 'measured')),
    gpu_profile    TEXT NOT NULL,            -- profile names as loaded (store/profile.h)
    host_profile   TEXT NOT NULL,
    policy         TEXT NOT NULL,            -- writescope | static | stream | cpu-attn
    batch          INTEGER NOT NULL,
    prompt_tokens  INTEGER NOT NULL,
    output_tokens  INTEGER NOT NULL,
    layers         INTEGER NOT NULL,         -- layers run
    model_layers   INTEGER NOT NULL,         -- the model's
    seed           INTEGER NOT NULL,
    params         TEXT NOT NULL DEFAULT '{}', -- JSON: every other setting
    wall_s         REAL,                     -- real seconds of the decode steps
    decode_s       REAL,                     -- the steps' timeline (CPU measured, GPU as gpu_source)
    prefill_modeled_s REAL,                  -- prefill compute, modeled
    tokens_out     INTEGER NOT NULL DEFAULT 0,
    tokens_per_s   REAL,
    step_p50       REAL, step_p99 REAL,
    share_cpu_attn REAL, share_experts REAL, share_overhead REAL, share_gpu_wait REAL,
    verify_max_err REAL,                     -- NULL: not verified
    bytes_moved    INTEGER NOT NULL DEFAULT 0 -- KV bytes written again after placement
);

CREATE TABLE run_steps (
    run_id     INTEGER NOT NULL REFERENCES run_runs(id) ON DELETE CASCADE,
    idx        INTEGER NOT NULL,            -- decode step, from 0
    t_start    REAL NOT NULL,
    t_end      REAL NOT NULL,
    batch      INTEGER NOT NULL,
    tokens     INTEGER NOT NULL,
    context    INTEGER NOT NULL DEFAULT 0,  -- tokens attended per layer, all sequences
    r_star     REAL,
    r_real     REAL,
    busy_gpu   REAL, busy_h2d REAL, busy_d2h REAL, busy_cpu REAL,
    busy_other TEXT NOT NULL DEFAULT '{}',  -- JSON: the CPU's phases, measured
    wall_s     REAL,                        -- real seconds the step took
    verify_err REAL,                        -- NULL: not verified
    PRIMARY KEY (run_id, idx)
);

CREATE TABLE run_layers (
    run_id      INTEGER NOT NULL REFERENCES run_runs(id) ON DELETE CASCADE,
    step        INTEGER NOT NULL,
    layer       INTEGER NOT NULL,
    n_cpu       INTEGER NOT NULL,           -- tokens attended from CPU pages
    m_xfer      INTEGER NOT NULL,           -- tokens streamed from XFER pages
    resident    INTEGER NOT NULL,           -- tokens in D-windows
    cpu_attn_s  REAL,                       -- measured
    router_s    REAL,                       -- measured
    experts_s   REAL,                       -- measured
    gpu_s       REAL,                       -- the GPU half, as gpu_source says
    gpu_source  TEXT NOT NULL CHECK (gpu_source IN ('modeled', 'measured')),
    overhead_s  REAL,                       -- measured
    r_real      REAL,
    r_star      REAL,
    a_est       REAL, b_est REAL,           -- the policy's adopted A and B, s/token
    pred_cpu_s  REAL, pred_gpu_s REAL, pred_experts_s REAL, -- the cost model's
    flush_pages INTEGER NOT NULL DEFAULT 0,
    flush_cpu_pages INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, step, layer)
);
