-- ledger.owed_again: the set-aside duties in scope that no run has repaid yet,
-- with the clock (and a backfill's window) of the run that set each aside and
-- the first clock it owed them. Only duties dispatchable now: a duty paused,
-- retired or sent back for review since stays owed, and is repaid once it is
-- dispatched again; a deleted one owes nothing. Slot: {scope} (over duly_duty d).
SELECT s.run_id, r.clock, s.owed_from, r.window_from, r.window_to, s.duty_id
FROM duly_dispatch_set_aside s
JOIN duly_dispatch_run r ON r.id = s.run_id
JOIN duly_duty d ON d.id = s.duty_id
WHERE s.repaid_by IS NULL
  AND d.status = 'active' AND d.form = 'recurring' AND d.review_status = 'approved'
  AND {scope}
ORDER BY r.clock, s.owed_from, s.duty_id
