-- Schema version 8: capacity plans (`writescope plan`). A plan is one search with the
-- simulator over GPU profiles, policies and settings for one model, host, workload and SLO;
-- every number in it is modeled. plan_points holds every simulation the search ran (the
-- load points give goodput against load; the fit points the OOM frontier); plan_results one
-- row per (GPU, policy, setting) with the highest load that met the SLOs; plan_fits the
-- largest context that fits per (GPU, policy, batch). Settings of 0 are the simulator's
-- defaults (GPU KV budget 2 GiB, 0.3 GiB for MLA models; page and window 256 tokens).

CREATE TABLE plan_runs (
    id           INTEGER PRIMARY KEY,
    started_at   TEXT NOT NULL,             -- UTC, ISO 8601
    tool_version TEXT NOT NULL,
    model        TEXT NOT NULL,
    host_profile TEXT NOT NULL,
    load_kind    TEXT NOT NULL CHECK (load_kind IN ('rate', 'users')), -- requests/s | users
    workload     TEXT NOT NULL,             -- the workload in words
    slo_ttft     REAL,                      -- s; NULL: none
    slo_tpot     REAL,                      -- s; NULL: none
    slo_pct      REAL NOT NULL,             -- percent of requests (users: of steps) within
    tol          REAL NOT NULL,             -- relative tolerance of the rate
    rounds       INTEGER NOT NULL,
    evals        INTEGER NOT NULL,
    wall_s       REAL,
    params       TEXT NOT NULL DEFAULT '{}', -- JSON: every other setting
    label        TEXT NOT NULL DEFAULT 'modeled' CHECK (label = 'modeled')
);

CREATE TABLE plan_points (
    plan_id      INTEGER NOT NULL REFERENCES plan_runs(id) ON DELETE CASCADE,
    idx          INTEGER NOT NULL,
    round        INTEGER NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('load', 'fit')),
    gpu_profile  TEXT NOT NULL,
    policy       TEXT NOT NULL,
    kv_gb        REAL NOT NULL DEFAULT 0,
    page_tokens  INTEGER NOT NULL DEFAULT 0,
    window_tokens INTEGER NOT NULL DEFAULT 0,
    load         REAL,                      -- load points: requests/s or users
    batch        INTEGER,                   -- fit points
    context      INTEGER,                   -- fit points: prompt tokens of each
    meets        INTEGER NOT NULL,          -- 1: met the SLOs (fit: fitted)
    attain       REAL,                      -- share within the SLOs
    ttft_q       REAL, tpot_q REAL,         -- s at slo_pct; NULL: an OOM inside it
    goodput      REAL,                      -- requests within the SLOs / s
    tokens_per_s REAL,                      -- rate: output tokens / makespan; users: decode
    requests     INTEGER, served INTEGER, oom INTEGER,
    peak_batch   INTEGER,
    wall_s       REAL,
    PRIMARY KEY (plan_id, idx)
);

CREATE TABLE plan_results (
    plan_id       INTEGER NOT NULL REFERENCES plan_runs(id) ON DELETE CASCADE,
    gpu_profile   TEXT NOT NULL,
    policy        TEXT NOT NULL,
    kv_gb         REAL NOT NULL DEFAULT 0,
    page_tokens   INTEGER NOT NULL DEFAULT 0,
    window_tokens INTEGER NOT NULL DEFAULT 0,
    best          INTEGER NOT NULL,         -- 1: the best setting of (GPU, policy)
    max_load      REAL NOT NULL,            -- 0: no load met the SLOs
    capped        INTEGER NOT NULL,         -- 1: the highest load tried met them
    goodput       REAL,                     -- at max_load
    tokens_per_s  REAL,
    ttft_q        REAL, tpot_q REAL, attain REAL,
    price_per_h   REAL,                     -- $/hour; NULL: none given
    cost_per_mtok REAL,                     -- $ per million output tokens; NULL: no price
    evals         INTEGER NOT NULL
);

CREATE TABLE plan_fits (
    plan_id     INTEGER NOT NULL REFERENCES plan_runs(id) ON DELETE CASCADE,
    gpu_profile TEXT NOT NULL,
    policy      TEXT NOT NULL,
    batch       INTEGER NOT NULL,
    max_context INTEGER NOT NULL,           -- prompt tokens of each of batch sequences
    capped      INTEGER NOT NULL
);
