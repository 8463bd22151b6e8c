-- The last column of a page's duties (page_owed.sql's and page_taken_ids.sql's
-- head include it, where they say `-- duly:include page_afresh_owed`), each
-- duty as d: whether it is owed a judgement afresh (plan.account_judged): one
-- the previous run set aside while it judged it afresh (migration 0022), as
-- of the day of the judgement it owes (Afresh.owed_at: that run's clock, or
-- an earlier run's for a duty set aside again), if its window held that day.
-- Every duty under rules new at this run is judged afresh in page_owed.sql's
-- placed.
           CASE WHEN duly_afresh(d.id, d.organization_id, %(afresh_ids)s::text[],
                                 %(afresh_keys)s::text[])
                THEN NOT coalesce(
                    duly_local_day(
                        (SELECT min(u.clock)
                         FROM (SELECT i.clock
                               FROM unnest(%(afresh_ids)s::text[],
                                           %(afresh_id_clocks)s::timestamptz[]) AS i(id, clock)
                               WHERE i.id = d.id
                               UNION ALL
                               SELECT k.clock
                               FROM unnest(%(afresh_keys)s::text[],
                                           %(afresh_key_clocks)s::timestamptz[]) AS k(key, clock)
                               WHERE k.key = duly_duty_key(d.organization_id, d.id)) u),
                        d.timezone) > d.effective_to, false)
                ELSE false
           END AS afresh_owed
