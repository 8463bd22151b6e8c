-- ledger.previous_judgement: of the latest completed scheduled, unscoped,
-- non-dry run, the rules it judged by (migration 0012; null before any run
-- recorded them) and the duties it, or an earlier link of its chain, set
-- aside while it judged them afresh (migration 0022): a run judges those
-- afresh too. A manual run at a clock later than the wall clock when it
-- started is never the previous run, as duly_latest_scheduled_clock() never
-- counts it.
WITH RECURSIVE previous AS (
    SELECT r.id, r.rules
    FROM duly_dispatch_run r
    WHERE r.status = 'completed' AND r.mode = 'scheduled' AND NOT r.dry_run
      AND r.organization_id IS NULL AND r.duty_ids IS NULL
      AND (r.resume_after IS NULL OR r.continues_run IS NOT NULL)
      AND r.clock <= r.started_at
    ORDER BY r.clock DESC, r.id DESC
    LIMIT 1
),
chain(id) AS (
    -- The links a chain's last one continues: each set aside what it reached.
    SELECT id FROM previous
    UNION ALL
    SELECT r.continues_run
    FROM duly_dispatch_run r
    JOIN chain ON r.id = chain.id
    WHERE r.continues_run IS NOT NULL
)
SELECT previous.rules,
       array(SELECT DISTINCT s.duty_id
             FROM duly_dispatch_set_aside s
             WHERE s.run_id IN (SELECT id FROM chain) AND s.afresh
             ORDER BY s.duty_id) AS afresh
FROM previous
