-- Up to %(limit)s dispatchable duties in {scope} of one group, with the fields
-- periods.check_due_rule judges, so a report can list each refused duty with
-- the engine's own message. %(out_of_range)s: only those whose offsets or
-- grace the page statement sets aside.
SELECT d.id, d.due_anchor, d.due_offset_days, d.due_offset_months, d.due_roll,
       d.holiday_calendar, d.grace_days
FROM duly_duty d
WHERE d.status = 'active' AND d.form = 'recurring' AND d.review_status = 'approved'
  AND {scope}
  AND d.frequency IS NOT DISTINCT FROM %(frequency)s::text
  AND d.timezone = %(timezone)s AND d.due_anchor = %(anchor)s AND d.due_roll = %(roll)s
  AND d.holiday_calendar IS NOT DISTINCT FROM %(calendar)s::text
  AND (NOT %(out_of_range)s OR NOT (
      CASE WHEN d.due_anchor = 'after_period_end'
           THEN d.due_offset_months BETWEEN 0 AND 24
                AND d.due_offset_days BETWEEN 0 AND 366
           ELSE d.due_offset_months = 0 END
      AND d.grace_days BETWEEN 0 AND 366))
ORDER BY d.id
LIMIT %(limit)s
