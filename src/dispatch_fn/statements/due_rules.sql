-- Every due rule (anchor, roll, calendar) among the dispatchable duties in
-- {scope} outside the groups the run refused (%(g_frequency)s, %(g_timezone)s,
-- %(g_lead_bucket)s: those duties are the group's faults), with how many
-- duties use it and how many of those have offsets or a grace that
-- periods.check_due_rule refuses: the same test as page_owed.sql's placed. The run judges each rule once
-- (plan.check_due_rule); the page statement sets aside the refused ones.
SELECT d.due_anchor, d.due_roll, d.holiday_calendar, count(*),
       count(*) FILTER (WHERE NOT (
           CASE WHEN d.due_anchor = 'after_period_end'
                THEN d.due_offset_months BETWEEN 0 AND 24
                     AND d.due_offset_days BETWEEN 0 AND 366
                ELSE d.due_offset_months = 0 END
           AND d.grace_days BETWEEN 0 AND 366))
FROM duly_duty d
WHERE d.status = 'active' AND d.form = 'recurring' AND d.review_status = 'approved'
  AND {scope}
  -- Usually no group is refused: the test of the array's length is then true
  -- once the value is bound, and the plan has no anti-join for every duty.
  AND (cardinality(%(g_frequency)s::text[]) = 0 OR NOT EXISTS (
      SELECT 1
      FROM unnest(%(g_frequency)s::text[], %(g_timezone)s::text[],
                  %(g_lead_bucket)s::int[]) AS g(frequency, timezone, lead_bucket)
      WHERE g.frequency IS NOT DISTINCT FROM d.frequency AND g.timezone = d.timezone
        -- plan.lead_bucket's rule (dispatchable_groups.sql).
        AND g.lead_bucket = width_bucket(d.lead_days, %(lead_thresholds)s::int[])))
GROUP BY 1, 2, 3
