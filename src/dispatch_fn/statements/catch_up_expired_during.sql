-- catch_up.page_statements: the dispatchable duties in scope whose effective
-- window closed during the outage (between a day before the first missed
-- clock and a day after the run's own, a margin that covers every zone). At
-- the run's clock they owe nothing, so they alone get every candidate of each
-- missed clock. Slot: {scope}.
SELECT d.id FROM duly_duty d
WHERE d.status = 'active' AND d.form = 'recurring' AND d.review_status = 'approved'
  AND {scope}
  AND d.effective_to >= %(lo)s AND d.effective_to < %(hi)s
ORDER BY d.id
