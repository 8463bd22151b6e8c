-- catch_up.page_statements: the dispatchable duties in scope whose effective
-- window closed during the outage (between a day before the first missed
-- clock and a day after the run's own, a margin that covers every zone). At
-- the run's clock they owe nothing, so they alone get every candidate of each
-- missed clock.
SELECT d.id FROM duly_duty d
WHERE duly_dispatchable(d.status, d.form, d.review_status)
  AND duly_in_scope(d.id, d.organization_id, %(organization_id)s::text,
                    %(duty_ids)s::text[], %(resume_after)s::text)
  AND d.effective_to >= %(lo)s AND d.effective_to < %(hi)s
ORDER BY d.id
