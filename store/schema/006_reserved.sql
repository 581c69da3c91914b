-- Schema version 6 is another branch's migration; this placeholder only keeps the numbering
-- whole on the validate branch and is replaced by that migration when the branches merge.
SELECT 1;
