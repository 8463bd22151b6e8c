-- ledger.previous_judgement: of the latest completed scheduled, unscoped,
-- non-dry run, the rules it judged by (migration 0012; null before any run
-- recorded them) and the duties it, or an earlier link of its chain, set
-- aside while it judged them afresh (migration 0022): a run judges those
-- afresh too. A manual run at a clock later than the wall clock when it
-- started is never the previous run, as duly_latest_scheduled_clock() never
-- counts it.
WITH RECURSIVE previous AS (
    SELECT r.id, r.rules, r.continues_run
    FROM duly_dispatch_run r
    WHERE r.status = 'completed' AND r.mode = 'scheduled' AND NOT r.dry_run
      AND r.organization_id IS NULL AND r.duty_ids IS NULL
      AND (r.resume_after IS NULL OR r.continues_run IS NOT NULL)
      AND r.clock <= r.started_at
    ORDER BY r.clock DESC, r.id DESC
    LIMIT 1
),
chain(id, continues_run, last, mark) AS (
    -- The links a chain's last one continues, each with the mark it stopped
    -- at: a duty one set aside past its mark, its continuation read again.
    SELECT id, continues_run, true, NULL::text FROM previous
    UNION ALL
    SELECT r.id, r.continues_run, false, r.report ->> 'last_duty_id'
    FROM duly_dispatch_run r
    JOIN chain ON r.id = chain.continues_run
)
SELECT previous.rules,
       -- Each as [organization_id, duty_id, owed_from]: the organisation null
       -- where the run knew the duty by its id alone; owed_from, the clock of
       -- the judgement it owes (an earlier run's, for a duty set aside again).
       (SELECT coalesce(jsonb_agg(jsonb_build_array(s.organization_id, s.duty_id, s.owed_from)
                                  ORDER BY s.duty_id, s.organization_id), '[]')
        FROM (SELECT a.organization_id, a.duty_id, min(a.owed_from) AS owed_from
              FROM duly_dispatch_set_aside a
              JOIN chain ON a.run_id = chain.id
              WHERE a.afresh AND (chain.last OR a.duty_id <= chain.mark)
              GROUP BY a.organization_id, a.duty_id) s) AS afresh
FROM previous
