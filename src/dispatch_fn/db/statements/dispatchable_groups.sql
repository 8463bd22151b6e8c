-- Every group of dispatchable duties in the run's scope, one per frequency, zone and
-- lead bucket, with how many there are and their largest lead: the run plans
-- one schedule per group (dispatch._plan_groups). The bucket is
-- plan.lead_bucket's rule, width_bucket over plan.LEAD_THRESHOLDS (powers of
-- two), so one duty with a lead of years is planned apart from the rest
-- (docs/adr/0009). One aggregate per run: its size is bounded by the
-- frequencies, zones and lead buckets in use, not by the number of duties,
-- nor by how many anchors, rolls and calendars they combine with (those are
-- due_rules.sql, judged apart).
SELECT d.frequency, d.timezone, width_bucket(d.lead_days, %(lead_thresholds)s::int[]),
       count(*), max(d.lead_days)
FROM duly_duty d
WHERE duly_dispatchable(d.status, d.form, d.review_status)
  AND duly_in_scope(d.id, d.organization_id, %(organization_id)s::text,
                    %(duty_ids)s::text[], %(resume_after)s::text)
GROUP BY 1, 2, 3
