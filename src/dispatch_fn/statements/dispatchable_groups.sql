-- Every group of dispatchable duties in {scope}: those that share one frequency,
-- zone, anchor, roll and calendar, with how many there are, their largest
-- lead, and how many have offsets or a grace that periods.check_due_rule
-- refuses (the same test as page_owed.sql's placed). One aggregate per run:
-- its size is bounded by the cadences in use, not by the number of duties.
SELECT d.frequency, d.timezone, d.due_anchor, d.due_roll, d.holiday_calendar,
       count(*), max(d.lead_days),
       count(*) FILTER (WHERE NOT (
           CASE WHEN d.due_anchor = 'after_period_end'
                THEN d.due_offset_months BETWEEN 0 AND 24
                     AND d.due_offset_days BETWEEN 0 AND 366
                ELSE d.due_offset_months = 0 END
           AND d.grace_days BETWEEN 0 AND 366))
FROM duly_duty d
WHERE d.status = 'active' AND d.form = 'recurring' AND d.review_status = 'approved'
  AND {scope}
GROUP BY 1, 2, 3, 4, 5
