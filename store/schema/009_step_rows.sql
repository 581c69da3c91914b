-- Schema version 9: one step row for the simulator and the runtime (store/steprow.h): a
-- simulated step has the runtime's columns too, NULL where it has no such value (a step's
-- real time and its verification error).
ALTER TABLE sim_steps ADD COLUMN wall_s REAL;
ALTER TABLE sim_steps ADD COLUMN verify_err REAL;
