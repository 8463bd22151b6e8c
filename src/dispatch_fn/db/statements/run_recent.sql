-- ledger.recent: the newest runs for `python -m dispatch_fn runs`, optionally
-- only those of one mode or one shown status. A run still 'running' after the
-- function's timeout was killed: abandoned, and shown (and filtered) as such.
-- A list shows each run's scope as a sample of its duty ids and their count, and
-- clips its free text, so a page of runs stays small whatever a run was scoped by
-- (`runs show ID` gives one run whole).
SELECT id, mode, clock, window_from, window_to,
       left(organization_id, %(text_chars)s) AS organization_id,
       CASE WHEN duty_ids IS NOT NULL THEN
           ARRAY(SELECT left(sampled.id, %(text_chars)s)
                 FROM unnest(duty_ids[1:%(id_sample)s]) WITH ORDINALITY AS sampled (id, n)
                 ORDER BY sampled.n)
       END AS duty_ids,
       cardinality(duty_ids) AS duty_ids_count,
       dry_run, left(request_id, %(text_chars)s) AS request_id,
       continues_run, continuation, status, started_at, finished_at,
       left(error, %(error_chars)s) AS error,
       (report ->> 'tasks_created')::bigint AS tasks_created,
       (report ->> 'tasks_existing')::bigint AS tasks_existing,
       (SELECT coalesce(sum(value::bigint), 0)::bigint
        FROM jsonb_each_text(report -> 'fault_counts')) AS faults,
       (report ->> 'beyond_horizon')::bigint AS beyond_horizon,
       status = 'running' AND started_at < clock_timestamp() - %(timeout)s::interval AS abandoned
FROM duly_dispatch_run
WHERE (%(mode)s::text IS NULL OR mode = %(mode)s::text)
  AND (%(status)s::text IS NULL
       OR CASE WHEN status = 'running' AND started_at < clock_timestamp() - %(timeout)s::interval
               THEN 'abandoned' ELSE status END = %(status)s::text)
ORDER BY started_at DESC, id DESC
LIMIT %(limit)s
