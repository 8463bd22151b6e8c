-- The last column of a page's duties (page_owed.sql's and page_taken_ids.sql's
-- head include it, where they say `-- duly:include page_afresh_owed`), each
-- duty as d: whether it is owed a judgement afresh (plan.account_judged): one
-- the previous run set aside while it judged it afresh (migration 0022), as
-- of that run's day, if its window held that day (no previous run: none,
-- as Afresh.owed_at says). Every duty under rules new at this run is judged
-- afresh in page_owed.sql's placed.
           CASE WHEN %(afresh_at)s::timestamptz IS NOT NULL
                     AND duly_afresh(d.id, d.organization_id, %(afresh_ids)s::text[],
                                     %(afresh_keys)s::text[])
                THEN NOT coalesce(duly_local_day(%(afresh_at)s::timestamptz, d.timezone)
                                  > d.effective_to, false)
                ELSE false
           END AS afresh_owed
