-- Schema version 6: simulation grids. A `writescope sim grid` (the paper's grid, or a part
-- of it) stored as one sim_grids row and one sim_runs row per grid point and policy, named
-- by sim_runs.grid_id (NULL for a run of `writescope sim`). The grid's rows are written in
-- one transaction (store/simdb.c), by one process: under MPI, rank 0.

CREATE TABLE sim_grids (
    id           INTEGER PRIMARY KEY,
    started_at   TEXT NOT NULL,              -- UTC, ISO 8601 (wall clock)
    tool_version TEXT NOT NULL,
    params       TEXT NOT NULL DEFAULT '{}', -- JSON: host, models, GPUs, batches, prompts, ...
    ranks        INTEGER NOT NULL DEFAULT 1  -- processes the points were spread over
);

ALTER TABLE sim_runs ADD COLUMN grid_id INTEGER REFERENCES sim_grids(id) ON DELETE CASCADE;
CREATE INDEX sim_runs_grid ON sim_runs(grid_id);
