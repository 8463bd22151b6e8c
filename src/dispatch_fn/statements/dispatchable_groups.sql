-- Every group of dispatchable duties in {scope}, one per frequency and zone,
-- with how many there are and their largest lead: the run plans one schedule
-- per group (dispatch._plan_groups). One aggregate per run: its size is
-- bounded by the frequencies and zones in use, not by the number of duties,
-- nor by how many anchors, rolls and calendars they combine with (those are
-- due_rules.sql, judged apart).
SELECT d.frequency, d.timezone, count(*), max(d.lead_days)
FROM duly_duty d
WHERE d.status = 'active' AND d.form = 'recurring' AND d.review_status = 'approved'
  AND {scope}
GROUP BY 1, 2
