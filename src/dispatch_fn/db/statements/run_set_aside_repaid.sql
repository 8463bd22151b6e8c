-- ledger.mark_repaid: run %(run_id)s owed these set-aside duties again and
-- dispatched them: those it did not set aside once more, and, for a run that
-- stopped early, only those up to its gapless mark (compared as the pages
-- compare ids, in the database's collation).
UPDATE duly_dispatch_set_aside s SET repaid_by = %(run_id)s
FROM unnest(%(run_ids)s::bigint[], %(duty_ids)s::text[]) AS o(run_id, duty_id)
WHERE s.run_id = o.run_id AND s.duty_id = o.duty_id AND s.repaid_by IS NULL
  AND s.duty_id <> ALL(%(again)s::text[])
  AND (%(complete)s OR s.duty_id <= %(upto)s)
