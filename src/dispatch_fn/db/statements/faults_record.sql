-- faults.record: the account of the faults run %(run_id)s found (migration
-- 0013), kept in one statement, so it changes whole or not at all.
-- The run faulted the duties %(fault_ids)s, each with its reason and detail,
-- and its organisation where the run read it (%(fault_organizations)s; null:
-- known by id alone, every row of the id).
-- It judged every duty in its scope, or, having stopped early (%(complete)s
-- false), those up to its gapless mark %(upto)s (none while that is null),
-- except the duties it set aside (%(set_aside)s, each by its organisation
-- %(set_aside_organizations)s where the run read it, else every row of the
-- id): their page never ran.
--   A faulted duty with no row gets one, since this run: its fault began
--   here. One with a row keeps it (ON CONFLICT DO NOTHING), and with it the
--   clock its fault began at; so does any duty the run did not judge.
--   A judged duty that is not faulted loses its row: its fault has ended,
--   and if it breaks again, that is a new fault.
-- A fault's organisation is its duty's, read under the run's scope as every
-- statement reads duties: on a layout where an id repeats across
-- organisations (ADR 0005), the one the run named; ids compare in the
-- database's collation, as the pages compare them. Rows are added in key order, so two runs adding the
-- same faults at once take their locks in the same order.
-- A judgement older than one already kept changes nothing: a run that
-- started after this one, judged every duty and ended before this statement
-- (the second delivery of one event, which ran whole while this one waited
-- on its pages) kept the account by fresher readings, and this run's would
-- put back a fault mended in between, or end one begun since.
-- began: how many rows this run added, the run's NewFaults.
WITH fresher AS (
    SELECT 1
    FROM duly_dispatch_run r
    WHERE r.id > %(run_id)s AND r.status = 'completed' AND NOT r.dry_run
      AND r.organization_id IS NULL AND r.duty_ids IS NULL AND r.resume_after IS NULL
    LIMIT 1
),
faulted AS (
    SELECT DISTINCT ON (d.organization_id, d.id)
           d.organization_id, d.id AS duty_id, f.reason, f.detail
    FROM unnest(%(fault_ids)s::text[], %(reasons)s::text[], %(details)s::text[],
                %(fault_organizations)s::text[])
         AS f(duty_id, reason, detail, organization_id)
    JOIN duly_duty d
      ON d.id = f.duty_id AND (f.organization_id IS NULL OR d.organization_id = f.organization_id)
    WHERE duly_in_scope(d.id, d.organization_id, %(organization_id)s::text,
                        %(duty_ids)s::text[], %(resume_after)s::text)
      AND NOT EXISTS (SELECT FROM fresher)
    ORDER BY d.organization_id, d.id
),
ended AS (
    DELETE FROM duly_dispatch_fault a
    WHERE duly_in_scope(a.duty_id, a.organization_id, %(organization_id)s::text,
                        %(duty_ids)s::text[], %(resume_after)s::text)
      AND (%(complete)s OR a.duty_id <= %(upto)s)
      AND NOT EXISTS (SELECT FROM fresher)
      AND NOT EXISTS (
          SELECT FROM unnest(%(set_aside)s::text[], %(set_aside_organizations)s::text[])
                      AS s(duty_id, organization_id)
          WHERE s.duty_id = a.duty_id
            AND (s.organization_id IS NULL OR s.organization_id = a.organization_id))
      AND NOT EXISTS (
          SELECT FROM faulted f
          WHERE f.organization_id = a.organization_id AND f.duty_id = a.duty_id)
),
began AS (
    INSERT INTO duly_dispatch_fault (organization_id, duty_id, reason, detail, since, since_run)
    SELECT organization_id, duty_id, reason, detail, %(clock)s, %(run_id)s
    FROM faulted
    ORDER BY organization_id, duty_id
    ON CONFLICT DO NOTHING
    RETURNING 1
)
SELECT count(*) AS began FROM began
