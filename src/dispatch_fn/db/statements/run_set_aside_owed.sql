-- ledger.owed_again: the set-aside duties in scope that no run has repaid yet,
-- with the clock (and a backfill's window) of the run that set each aside and
-- the first clock it owed them. Only duties dispatchable now: a duty paused,
-- retired or sent back for review since stays owed, and is repaid once it is
-- dispatched again; a deleted one owes nothing.
SELECT s.run_id, r.clock, s.owed_from, r.window_from, r.window_to, s.duty_id
FROM duly_dispatch_set_aside s
JOIN duly_dispatch_run r ON r.id = s.run_id
JOIN duly_duty d ON d.id = s.duty_id
WHERE s.repaid_by IS NULL
  AND duly_dispatchable(d.status, d.form, d.review_status)
  AND duly_in_scope(d.id, d.organization_id, %(organization_id)s::text,
                    %(duty_ids)s::text[], %(resume_after)s::text)
ORDER BY r.clock, s.owed_from, s.duty_id
