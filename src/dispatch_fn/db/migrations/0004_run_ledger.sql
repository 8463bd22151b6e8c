-- The run ledger (SPEC §9): one row per invocation, written when the run
-- starts and again when it ends, each time in a short statement of its own,
-- never inside a page's transaction. A run killed mid-way keeps status
-- 'running'; once its started_at is older than the function's timeout it can
-- only have been abandoned (the `runs` command says so).

CREATE TABLE duly_dispatch_run (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    mode            text NOT NULL,
    clock           timestamptz NOT NULL,
    window_from     date,
    window_to       date,
    organization_id text,
    duty_ids        text[],
    dry_run         boolean NOT NULL,
    request_id      text,
    continues_run   bigint REFERENCES duly_dispatch_run (id),
    -- Which hand-off of a chain this run is (0: not a continuation), and the
    -- duty id it resumed after: how a continuation finds the run it continues.
    continuation    integer NOT NULL DEFAULT 0,
    resume_after    text,
    status          text NOT NULL DEFAULT 'running',
    started_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at     timestamptz,
    report          jsonb,
    error           text,
    CONSTRAINT duly_dispatch_run_mode CHECK (mode IN ('scheduled', 'backfill')),
    CONSTRAINT duly_dispatch_run_status
        CHECK (status IN ('running', 'completed', 'incomplete', 'failed')),
    CONSTRAINT duly_dispatch_run_finished
        CHECK ((status = 'running') = (finished_at IS NULL))
);

-- Catch-up asks one question before every scheduled run: the latest clock of a
-- completed, scheduled, unscoped, non-dry run (a chain's last link counts: it
-- completed what its predecessors left). This index holds exactly those rows.
CREATE INDEX duly_dispatch_run_completed_clock
    ON duly_dispatch_run (clock DESC)
    WHERE status = 'completed' AND mode = 'scheduled' AND NOT dry_run
      AND organization_id IS NULL AND duty_ids IS NULL
      AND (resume_after IS NULL OR continues_run IS NOT NULL);

-- The `runs` command lists the newest first.
CREATE INDEX duly_dispatch_run_started ON duly_dispatch_run (started_at DESC);

-- A continuation looks up the run it continues by clock.
CREATE INDEX duly_dispatch_run_clock ON duly_dispatch_run (clock);
