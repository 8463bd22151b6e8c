-- The duties a run set aside (SPEC §9, docs/operations.md "Set-aside duties"):
-- their row was locked elsewhere, or their statement timed out alone, so they
-- did not get that run's periods. The next run that writes owes them again;
-- repaid_by names the run that did. A child of the ledger rather than an
-- array on its row: a repayment marks duty by duty (a duty locked again while
-- it is repaid stays owed), and the report lists only the first hundred.
CREATE TABLE duly_dispatch_set_aside (
    run_id    bigint NOT NULL REFERENCES duly_dispatch_run (id),
    duty_id   text NOT NULL,
    reason    text NOT NULL,
    -- The first clock the run owed it: its first caught-up clock, if it
    -- caught up (a duty set aside misses those too), else the run's own.
    owed_from timestamptz NOT NULL,
    repaid_by bigint REFERENCES duly_dispatch_run (id),
    PRIMARY KEY (run_id, duty_id),
    CONSTRAINT duly_dispatch_set_aside_reason CHECK (reason IN ('locked', 'timed_out'))
);

-- Every run that writes asks for what is still owed: exactly these rows.
CREATE INDEX duly_dispatch_set_aside_owed ON duly_dispatch_set_aside (run_id)
    WHERE repaid_by IS NULL;

DO $$
BEGIN
    IF to_regrole('duly_dispatcher') IS NOT NULL THEN
        GRANT SELECT, INSERT ON duly_dispatch_set_aside TO duly_dispatcher;
        GRANT UPDATE (repaid_by) ON duly_dispatch_set_aside TO duly_dispatcher;
    END IF;
END
$$;
