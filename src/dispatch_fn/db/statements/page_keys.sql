-- The duties one page takes, in page order, as a FROM clause (page_owed.sql's
-- head, page_taken_ids.sql's and page_duty_rows.sql include it, where they
-- say `-- duly:include page_keys`): the next %(size)s dispatchable duties in
-- the page's keyset range and the run's scope, in id order, with every duty
-- sharing the last one's id, each as its whole row d.
-- The page's keys first, from migration 0016's index alone (it holds the id,
-- the instant the next owed day begins and the organisation: an index-only
-- scan), then each duty's row by its key: a duty the run passes over is
-- never read, whatever the planner makes of the heap's order.
FROM (SELECT k.organization_id, k.id
      FROM duly_duty k
      WHERE duly_dispatchable(k.status, k.form, k.review_status)
        -- The page's keyset range (a null bound is open) within the run's scope.
        AND (%(after)s::text IS NULL OR k.id > %(after)s)
        AND (%(upto)s::text IS NULL OR k.id <= %(upto)s)
        AND duly_in_scope(k.id, k.organization_id, %(organization_id)s::text,
                          %(duty_ids)s::text[], %(resume_after)s::text)
        -- A scheduled run reads the duties whose next owed day has begun, in
        -- their zone, by its clock, and those still owed a fresh judgement
        -- (docs/contract.md#account, migration 0022); null: every one.
        AND duly_read_now(k.id, k.organization_id, k.dispatch_next_at,
                          %(owed_at)s::timestamptz, %(afresh_ids)s::text[],
                          %(afresh_keys)s::text[])
        -- Duties the run set aside while settling a failing page (ADR 0003):
        -- by id, or, a locked row whose id another organisation's duty shares
        -- (docs/adr/0005), by its key alone. With no such row the test folds
        -- away, as the page is planned with its values.
        AND k.id <> ALL(%(excluded)s::text[])
        AND (cardinality(%(excluded_keyed_ids)s::text[]) = 0
             OR (k.organization_id, k.id) NOT IN (
                 SELECT * FROM unnest(%(excluded_organizations)s::text[],
                                      %(excluded_keyed_ids)s::text[])))
      ORDER BY k.id
      FETCH FIRST (%(size)s) ROWS WITH TIES) key
-- A lateral look-up, one per key (run-time pruned to the key's partition on
-- a partitioned layout): never a join the planner could hash over the
-- whole table.
CROSS JOIN LATERAL (
    SELECT * FROM duly_duty d
    WHERE d.organization_id = key.organization_id AND d.id = key.id
    -- A fence: flattened, the look-up would become a join.
    OFFSET 0) d
