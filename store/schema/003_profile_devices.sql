-- Schema version 3: a datasheet profile names the devices it describes, as the machine
-- reports them (CUDA device name for a GPU, /proc/cpuinfo model name for a host), and a
-- datasheet parameter may name the calibrated key that supersedes it. The profile loader
-- (store/profile.c) uses both to lay a calibration over the datasheet it refines.
ALTER TABLE profiles ADD COLUMN devices TEXT NOT NULL DEFAULT '[]';      -- JSON array of names
ALTER TABLE profile_params ADD COLUMN calibrated_by TEXT NOT NULL DEFAULT ''; -- e.g. link.h2d.bandwidth

-- Databases seeded before this version: give the shipped datasheet profiles what
-- profiles/datasheet.json now says (a fresh database gets it from the seed itself).
UPDATE profiles SET devices = '["NVIDIA A100-PCIE-40GB"]' WHERE name = 'a100-40gb-pcie' AND host_id IS NULL;
UPDATE profiles SET devices = '["NVIDIA A100-SXM4-80GB"]' WHERE name = 'a100-80gb-sxm' AND host_id IS NULL;
UPDATE profiles SET devices = '["Tesla V100-PCIE-32GB"]' WHERE name = 'v100-32gb-pcie' AND host_id IS NULL;
UPDATE profiles SET devices = '["NVIDIA H100 80GB HBM3"]' WHERE name = 'h100-sxm' AND host_id IS NULL;
UPDATE profiles SET devices = '["NVIDIA H200"]' WHERE name = 'h200' AND host_id IS NULL;
UPDATE profiles SET devices = '["Intel(R) Xeon(R) Gold 5318Y CPU @ 2.10GHz"]' WHERE name = 'xeon-gold-5318y' AND host_id IS NULL;
UPDATE profile_params SET calibrated_by = 'link.h2d.bandwidth' WHERE key = 'h2d_bw' AND profile_id IN (SELECT id FROM profiles WHERE host_id IS NULL AND kind = 'gpu');
UPDATE profile_params SET calibrated_by = 'link.d2h.bandwidth' WHERE key = 'd2h_bw' AND profile_id IN (SELECT id FROM profiles WHERE host_id IS NULL AND kind = 'gpu');
