-- Schema version 7 is another branch's migration; this placeholder only keeps the numbering
-- whole on the plan branch and is replaced by that migration when the branches merge.
SELECT 1;
