-- Every dispatchable duty in the run's scope that the run counts as a fault
-- before its pages, in id order, with every field the engine judges, so that
-- the report lists each with the engine's own message and the run keeps each
-- on account (dispatch._fault_list judges each again; faults.record). A duty
-- is one when its group was refused (%(g_frequency)s, %(g_timezone)s,
-- %(g_lead_bucket)s), else its due rule was (%(r_anchor)s, %(r_roll)s,
-- %(r_calendar)s; '' with %(r_no_calendar)s for no calendar, so a duty
-- naming the calendar '' is not taken for one with none), else its offsets
-- or grace lie out of range (duly_due_rule_in_range).
-- Every column: near the calendar's edge plan.judge_duty judges the whole row.
SELECT d.*
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
  AND (EXISTS (
           SELECT 1
           FROM unnest(%(g_frequency)s::text[], %(g_timezone)s::text[],
                       %(g_lead_bucket)s::int[]) AS g(frequency, timezone, lead_bucket)
           WHERE g.frequency IS NOT DISTINCT FROM d.frequency AND g.timezone = d.timezone
             -- plan.lead_bucket's rule (duty_census.sql).
             AND g.lead_bucket = width_bucket(d.lead_days, %(lead_thresholds)s::int[]))
       OR (d.due_anchor, d.due_roll, coalesce(d.holiday_calendar, ''), d.holiday_calendar IS NULL)
          IN (SELECT * FROM unnest(%(r_anchor)s::text[], %(r_roll)s::text[],
                                   %(r_calendar)s::text[], %(r_no_calendar)s::boolean[]))
       OR NOT duly_due_rule_in_range(
           d.due_anchor, d.due_offset_days, d.due_offset_months, d.grace_days))
ORDER BY d.id
