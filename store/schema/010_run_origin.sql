-- Schema version 10: what made a run. A simulation or a runtime run that `writescope
-- validate` makes to compare (often on a few of the model's layers) is part of that
-- validation, not a run of `writescope sim` or `writescope run`: origin says which, and the
-- figures over runs (plot throughput, speedup, latency and the newest run of share/util)
-- take only the commands' own. Runs a validation stored before this schema are found
-- through its links (validate_runs.run_id, sim_run_id and params.run_ids).

ALTER TABLE sim_runs ADD COLUMN origin TEXT NOT NULL DEFAULT 'sim'
    CHECK (origin IN ('sim', 'validate'));
ALTER TABLE run_runs ADD COLUMN origin TEXT NOT NULL DEFAULT 'run'
    CHECK (origin IN ('run', 'validate'));

UPDATE sim_runs SET origin = 'validate'
    WHERE id IN (SELECT sim_run_id FROM validate_runs WHERE sim_run_id IS NOT NULL);
UPDATE run_runs SET origin = 'validate'
    WHERE id IN (SELECT run_id FROM validate_runs WHERE run_id IS NOT NULL)
       OR id IN (SELECT j.value FROM validate_runs v,
                 json_each(CASE WHEN json_valid(v.params) THEN v.params ELSE '{}' END,
                           '$.run_ids') j);

CREATE INDEX sim_runs_origin ON sim_runs(origin, workload);
