-- ledger.owed_again: the set-aside duties in scope that no run has repaid yet,
-- with the clock of the run that set each aside and the first clock it owed
-- them, from clocks since %(earliest)s. Only duties still in duly_duty: a deleted one owes nothing.
-- Slot: {scope} (over duly_duty d).
SELECT s.run_id, r.clock, s.owed_from, s.duty_id
FROM duly_dispatch_set_aside s
JOIN duly_dispatch_run r ON r.id = s.run_id
JOIN duly_duty d ON d.id = s.duty_id
WHERE s.repaid_by IS NULL AND r.clock >= %(earliest)s AND {scope}
ORDER BY r.clock, s.owed_from, s.duty_id
