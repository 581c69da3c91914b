-- Schema version 3: a datasheet profile names the devices it describes, as the machine
-- reports them (CUDA device name for a GPU, /proc/cpuinfo model name for a host), and a
-- datasheet parameter may name the calibrated key that supersedes it. The profile loader
-- (store/profile.c) uses both to lay a calibration over the datasheet it refines.
ALTER TABLE profiles ADD COLUMN devices TEXT NOT NULL DEFAULT '[]';      -- JSON array of names
ALTER TABLE profile_params ADD COLUMN calibrated_by TEXT NOT NULL DEFAULT ''; -- e.g. link.h2d.bandwidth
