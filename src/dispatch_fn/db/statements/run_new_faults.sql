-- new_faults.count: how many of the duties run %(run_id)s faulted are new,
-- not faulted at the previous completed clock (the latest earlier clock whose
-- scheduled, unscoped, non-dry chain completed). Every run at that clock
-- counts together: each link of a chain lists the faults of its own part.
-- A report lists at most a hundred faults and counts the rest as
-- faults_omitted, so the answer is a lower bound, exact when neither side
-- omitted any; it is the larger of
--   (faults now) - (faults then): at most that many can be old, and
--   (listed now, not listed then) - (omitted then): at most that many of
--   those can hide among the faults not listed then.
-- Summing a clock's runs over-counts "then" when a run was retried: the bound
-- stays a bound. With no earlier completed clock every fault is new. No row
-- for an unknown run id.
WITH this_run AS (
    SELECT clock,
           coalesce(report -> 'faults', '[]') AS faults,
           coalesce((report ->> 'faults_omitted')::bigint, 0) AS omitted
    FROM duly_dispatch_run
    WHERE id = %(run_id)s
),
previous_clock AS (
    SELECT max(r.clock) AS clock
    FROM duly_dispatch_run r, this_run t
    WHERE r.status = 'completed' AND r.mode = 'scheduled' AND NOT r.dry_run
      AND r.organization_id IS NULL AND r.duty_ids IS NULL
      AND (r.resume_after IS NULL OR r.continues_run IS NOT NULL)
      AND r.clock < t.clock
),
previous_runs AS (
    SELECT coalesce(r.report -> 'faults', '[]') AS faults,
           coalesce((r.report ->> 'faults_omitted')::bigint, 0) AS omitted
    FROM duly_dispatch_run r
    JOIN previous_clock p ON r.clock = p.clock
    WHERE r.mode = 'scheduled' AND NOT r.dry_run
      AND r.organization_id IS NULL AND r.duty_ids IS NULL
      AND r.status IN ('completed', 'incomplete') AND r.report IS NOT NULL
),
listed_then AS (
    SELECT DISTINCT f ->> 'duty_id' AS duty_id
    FROM previous_runs, jsonb_array_elements(previous_runs.faults) f
),
listed_new AS (
    SELECT count(DISTINCT f ->> 'duty_id') AS duties
    FROM this_run, jsonb_array_elements(this_run.faults) f
    WHERE NOT EXISTS (SELECT FROM listed_then l WHERE l.duty_id = f ->> 'duty_id')
),
then_totals AS (
    SELECT coalesce(sum(jsonb_array_length(faults) + omitted), 0) AS faults,
           coalesce(sum(omitted), 0) AS omitted
    FROM previous_runs
)
SELECT CASE
    WHEN p.clock IS NULL THEN jsonb_array_length(t.faults) + t.omitted
    ELSE greatest(
        jsonb_array_length(t.faults) + t.omitted - h.faults,
        n.duties - h.omitted,
        0
    )
END
FROM this_run t, previous_clock p, listed_new n, then_totals h
