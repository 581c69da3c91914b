-- Schema version 9: one step row for the simulator and the runtime (store/steprow.h): a
-- simulated step has the runtime's columns too, NULL where it has no such value (a step's
-- real time, its verification error, the runtime's own work), and both tables hold the
-- CPU's phases of a step as columns of their own.
ALTER TABLE sim_steps ADD COLUMN wall_s REAL;
ALTER TABLE sim_steps ADD COLUMN verify_err REAL;
ALTER TABLE sim_steps ADD COLUMN cpu_attn_s REAL;
ALTER TABLE sim_steps ADD COLUMN experts_s REAL;
ALTER TABLE sim_steps ADD COLUMN overhead_s REAL;
ALTER TABLE run_steps ADD COLUMN cpu_attn_s REAL;
ALTER TABLE run_steps ADD COLUMN experts_s REAL;
ALTER TABLE run_steps ADD COLUMN overhead_s REAL;
