-- What a run learns before its pages, from one scan of the duties in its
-- scope: three sets of counts, each row tagged by its kind.
--
--   'form'  (form, status, review_status): the duties a run does not
--           dispatch, by the columns plan.classify names the reason from;
--   'group' (frequency, timezone, lead bucket): the dispatchable duties, with
--           their largest lead; the run plans one schedule per group
--           (dispatch._plan_groups). The bucket is plan.lead_bucket's rule,
--           width_bucket over plan.LEAD_THRESHOLDS (powers of two), so one
--           duty with a lead of years is planned apart from the rest
--           (docs/adr/0009);
--   'rule'  (due_anchor, due_roll, holiday_calendar): the dispatchable
--           duties, with how many have offsets or a grace out of range
--           (duly_due_rule_in_range, as the page statements test it). The
--           run judges each rule once (plan.check_due_rule). These counts
--           hold while no group is refused; when one is, the run counts the
--           rules again without its duties (due_rules.sql).
--
-- One scan, not one per set: the three sets used to be three statements, each
-- reading every duty in scope (a duty's row is wide and the table half empty
-- by its fillfactor), and the scan, not the hashing, was most of their cost
-- (docs/performance-history.md#census). As planned, it is one hash aggregate over a
-- serial scan: grouping sets are never aggregated in parallel, so no workers
-- read the table twice over. It stays one hash aggregate at every size
-- measured, to 10,000,000 duties, because store.census runs census_plan.sql
-- first. Each set stays bounded by the
-- values in use (frequencies, zones, buckets, rules, statuses), not by the
-- number of duties.
--
-- coalesce(..., false): a null form, status or review makes duly_dispatchable
-- null, and such a duty is not dispatchable either.
SELECT CASE WHEN grouping(form, status, review_status) = 0 THEN 'form'
            WHEN grouping(frequency, timezone, lead_bucket) = 0 THEN 'group'
            ELSE 'rule' END AS kind,
       form, status, review_status,
       frequency, timezone, lead_bucket,
       due_anchor, due_roll, holiday_calendar,
       count(*) FILTER (WHERE NOT dispatchable) AS undispatchable,
       count(*) FILTER (WHERE dispatchable) AS dispatchable,
       max(lead_days) FILTER (WHERE dispatchable) AS max_lead,
       count(*) FILTER (WHERE dispatchable AND NOT in_range) AS out_of_range
FROM (
    SELECT d.form, d.status, d.review_status, d.frequency, d.timezone, d.lead_days,
           width_bucket(d.lead_days, %(lead_thresholds)s::int[]) AS lead_bucket,
           d.due_anchor, d.due_roll, d.holiday_calendar,
           coalesce(duly_dispatchable(d.status, d.form, d.review_status), false) AS dispatchable,
           duly_due_rule_in_range(d.due_anchor, d.due_offset_days,
                                  d.due_offset_months, d.grace_days) AS in_range
    FROM duly_duty d
    WHERE duly_in_scope(d.id, d.organization_id, %(organization_id)s::text,
                        %(duty_ids)s::text[], %(resume_after)s::text)
      -- A run its deadline stopped counts what it reached (store.Scope.reach).
      AND (%(reach)s::text IS NULL OR d.id <= %(reach)s::text)
      -- A scheduled run reads the dispatchable duties whose next owed day has
      -- come, and those still owed a fresh judgement (docs/contract.md#account,
      -- migration 0022); it counts the rest of its 'form' set from an index
      -- (duty_census_left_out.sql).
      AND (%(owed_at)s::timestamptz IS NULL
           OR (duly_dispatchable(d.status, d.form, d.review_status)
               AND duly_read_now(d.id, d.organization_id, d.dispatch_next_at,
                                 %(owed_at)s::timestamptz, %(afresh_ids)s::text[],
                                 %(afresh_keys)s::text[])))
    -- A fence: flattened, the FILTERs would evaluate the two tests again.
    OFFSET 0
) d
GROUP BY GROUPING SETS ((form, status, review_status),
                        (frequency, timezone, lead_bucket),
                        (due_anchor, due_roll, holiday_calendar))
-- A 'form' row counts the duties not dispatched; the others, those dispatched.
HAVING CASE WHEN grouping(form, status, review_status) = 0
            THEN count(*) FILTER (WHERE NOT dispatchable) > 0
            ELSE count(*) FILTER (WHERE dispatchable) > 0 END
