-- Every due rule (anchor, roll, calendar) among the dispatchable duties in
-- the run's scope outside the groups the run refused (%(g_frequency)s,
-- %(g_timezone)s, %(g_lead_bucket)s: those duties are the group's faults),
-- with how many duties use it and how many of those have offsets or a grace
-- out of range (duly_due_rule_in_range, as the page statements test it). The
-- run judges each rule once (plan.check_due_rule); the page statements set
-- aside the refused ones.
SELECT d.due_anchor, d.due_roll, d.holiday_calendar, count(*) AS duties,
       count(*) FILTER (WHERE NOT duly_due_rule_in_range(
           d.due_anchor, d.due_offset_days, d.due_offset_months, d.grace_days)) AS out_of_range
FROM duly_duty d
WHERE duly_dispatchable(d.status, d.form, d.review_status)
  AND duly_in_scope(d.id, d.organization_id, %(organization_id)s::text,
                    %(duty_ids)s::text[], %(resume_after)s::text)
  -- A run its deadline stopped counts what it reached (store.Scope.reach).
  AND (%(reach)s::text IS NULL OR d.id <= %(reach)s::text)
  -- The duties a scheduled run reads (docs/contract.md#account).
  AND duly_read_now(d.id, d.organization_id, d.dispatch_next_at,
                    %(owed_at)s::timestamptz, %(afresh_ids)s::text[],
                    %(afresh_keys)s::text[])
  -- Usually no group is refused: the test of the array's length is then true
  -- once the value is bound, and the plan has no anti-join for every duty.
  AND (cardinality(%(g_frequency)s::text[]) = 0 OR NOT EXISTS (
      SELECT 1
      FROM unnest(%(g_frequency)s::text[], %(g_timezone)s::text[],
                  %(g_lead_bucket)s::int[]) AS g(frequency, timezone, lead_bucket)
      WHERE g.frequency IS NOT DISTINCT FROM d.frequency AND g.timezone = d.timezone
        -- plan.lead_bucket's rule (duty_census.sql).
        AND g.lead_bucket = width_bucket(d.lead_days, %(lead_thresholds)s::int[])))
GROUP BY 1, 2, 3
