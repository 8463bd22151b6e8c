-- The advance of page_write.sql and page_write_rerun.sql, included by both
-- (`-- duly:include page_advance`, expanded by sql.statement_text): one UPDATE
-- per duty the page wrote a task for or whose account moves.
advanced AS (
    -- One UPDATE per duty: last_dispatched_period and the account together
    -- (its next day included)
    -- (a row updated twice in one statement keeps one of the two). The
    -- organisation is part of the duty's key: on a layout partitioned by it
    -- (docs/adr/0005) the only index on id is (organization_id, id).
    -- The account is written only if no edit committed since the page read
    -- the row: dispatch_version is re-checked against the newest row version
    -- when a concurrent edit moved it first, so the run's bookkeeping never
    -- overwrites the edit's marks (the next run reads the edit).
    UPDATE duly_duty d
    SET last_dispatched_period = CASE WHEN (u.latest IS NOT NULL
                 AND (d.last_dispatched_period IS NULL
                      OR (coalesce(duly_period_first_day(d.last_dispatched_period), '-infinity'::date),
                          d.last_dispatched_period COLLATE "C")
                       < (duly_period_first_day(u.latest), u.latest)))
                                      THEN u.latest ELSE d.last_dispatched_period END,
        dispatch_through = CASE WHEN u.keep AND u.version = d.dispatch_version
                                THEN greatest(d.dispatch_through, u.today)
                                ELSE d.dispatch_through END,
        -- Marks of edits placed after the run's today (a run at a past clock)
        -- stay: a resume there still says what became owed before it was not
        -- (plan.account_after). A resume after the window's last day leaves
        -- no change mark (migration 0024); the open span it began after
        -- today says so.
        dispatch_paused_on = CASE WHEN u.keep AND u.version = d.dispatch_version
                                  THEN CASE WHEN d.dispatch_paused_on IS NOT NULL
                                             AND (d.dispatch_changed_on > u.today
                                                  AND d.dispatch_changed_on < date '9999-12-31'
                                                  OR upper_inf(d.dispatch_owed_between)
                                                     AND NOT d.dispatch_owed_between
                                                         @> daterange(u.today, NULL, '(]'))
                                            THEN greatest(d.dispatch_paused_on,
                                                          d.dispatch_through, u.today)
                                       END
                                  ELSE d.dispatch_paused_on END,
        -- The spans resumes opened (migration 0016) go with the pause they
        -- follow, and stay where it stays.
        dispatch_owed_between = CASE WHEN u.keep AND u.version = d.dispatch_version
                                     THEN CASE WHEN d.dispatch_paused_on IS NOT NULL
                                                AND (d.dispatch_changed_on > u.today
                                                     AND d.dispatch_changed_on < date '9999-12-31'
                                                     OR upper_inf(d.dispatch_owed_between)
                                                        AND NOT d.dispatch_owed_between
                                                            @> daterange(u.today, NULL, '(]'))
                                               THEN d.dispatch_owed_between
                                          END
                                     ELSE d.dispatch_owed_between END,
        dispatch_changed_on = CASE WHEN u.keep AND u.version = d.dispatch_version
                                   THEN CASE WHEN d.dispatch_changed_on > u.today
                                              AND d.dispatch_changed_on < date '9999-12-31'
                                             THEN d.dispatch_changed_on END
                                   ELSE d.dispatch_changed_on END,
        -- A recast mark that stays, placed while no run kept the account
        -- (the trigger marks every such change), stays only if the duty owed
        -- since this run's today by the change's day, as page_owed.sql asks
        -- of it against the origin: the account it now reads is kept.
        dispatch_recast_on = CASE WHEN u.keep AND u.version = d.dispatch_version
                                  THEN CASE WHEN d.dispatch_recast_on > u.today
                                             AND (d.dispatch_through IS NOT NULL
                                                  OR d.dispatch_paused_on IS NULL
                                                  OR d.dispatch_paused_on > u.today
                                                  OR d.dispatch_owed_between
                                                     && datemultirange(daterange(
                                                            u.today, d.dispatch_recast_on, '(]')))
                                            THEN d.dispatch_recast_on END
                                  ELSE d.dispatch_recast_on END,
        -- A mark that stays (placed after a past run's today) sends the duty
        -- back to the next run, which owes by it.
        dispatch_next = CASE WHEN u.next IS NOT NULL AND u.version = d.dispatch_version
                             THEN CASE WHEN u.keep AND (d.dispatch_changed_on > u.today
                                                            AND d.dispatch_changed_on < date '9999-12-31'
                                                            OR d.dispatch_paused_on IS NOT NULL
                                                            AND upper_inf(d.dispatch_owed_between)
                                                                AND NOT d.dispatch_owed_between
                                                                    @> daterange(u.today, NULL, '(]'))
                                       THEN date '0001-01-01' ELSE u.next END
                             ELSE d.dispatch_next END,
        -- The instant that day begins, never later (migration 0016).
        dispatch_next_at = CASE WHEN u.next IS NOT NULL AND u.version = d.dispatch_version
                                THEN CASE WHEN u.keep AND (d.dispatch_changed_on > u.today
                                                               AND d.dispatch_changed_on < date '9999-12-31'
                                                               OR d.dispatch_paused_on IS NOT NULL
                                                               AND upper_inf(d.dispatch_owed_between)
                                                                   AND NOT d.dispatch_owed_between
                                                                       @> daterange(u.today, NULL, '(]'))
                                          THEN timestamptz '0001-01-01 00:00:00+00'
                                          ELSE u.next_at END
                                ELSE d.dispatch_next_at END
    FROM (SELECT coalesce(k.organization_id, i.organization_id) AS organization_id,
                 coalesce(k.id, i.duty_id) AS id, k.today, k.version,
                 coalesce(k.keep, false) AS keep, i.latest, k.ldp_was,
                 -- The next day, written with the account or alone when it moves.
                 CASE WHEN k.keep OR k.next IS DISTINCT FROM k.next_was THEN k.next END AS next,
                 -- Its midnight less the widest offset the zone has through
                 -- offset_until; past it, less UTC+14's, the widest of all.
                 to_timestamp((k.next - date '1970-01-01') * 86400.0
                              - 60.0 * CASE WHEN k.next <= k.offset_until
                                            THEN k.widest_offset ELSE 840 END) AS next_at
          FROM (SELECT * FROM keeping WHERE keep OR next IS DISTINCT FROM next_was) k
          FULL JOIN (SELECT organization_id, duty_id, max(period_key COLLATE "C") AS latest
                     FROM inserted GROUP BY organization_id, duty_id) i
            ON (i.organization_id, i.duty_id) = (k.organization_id, k.id)) u
    -- The key compared as one-element arrays, not as equalities: nothing to
    -- hash, so the planner cannot read every duty partition whole for a
    -- page's few duties, and each is found by its organisation and id
    -- through the key, estimated as an equality would be.
    WHERE d.organization_id = ANY(ARRAY[u.organization_id]) AND d.id = ANY(ARRAY[u.id])
      AND ((u.latest IS NOT NULL
                 AND (d.last_dispatched_period IS NULL
                      OR (coalesce(duly_period_first_day(d.last_dispatched_period), '-infinity'::date),
                          d.last_dispatched_period COLLATE "C")
                       < (duly_period_first_day(u.latest), u.latest)))
           OR ((u.keep OR u.next IS NOT NULL) AND u.version = d.dispatch_version))
    -- Read after the update: the key just inserted is the duty's latest
    -- exactly when this statement moved it there, unless the duty already
    -- held it as the page read it (a new owner's task for the same period, a
    -- deleted task re-created): the row is then written for its account
    -- alone. A duty written for its key alone was written only to move it.
    RETURNING d.id,
              coalesce(d.last_dispatched_period = u.latest
                       AND u.ldp_was IS DISTINCT FROM u.latest, false) AS advanced,
              u.keep AND u.version = d.dispatch_version AS kept
),
