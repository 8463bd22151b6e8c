-- The faults on the duties' account (docs/contract.md#metrics): one row per
-- duty a run faulted, kept while it stays faulted, with the clock and the run
-- its fault began in. NewFaults counts the rows a run adds, so a duty that
-- stays broken is new once, however many duties are broken and however often
-- an event is delivered; a run removes the rows of the duties it dispatched
-- (db/faults.py says which).
--
-- Beside the duty, keyed as migration 0011 keys it, by (organization_id,
-- duty_id): the key carries the shard key. No foreign key to duly_duty: the
-- partitioned layout (layouts/partitioned.sql) drops and rebuilds that table,
-- and a duty's row must stay deletable by its owner without the dispatcher's
-- account in the way; a deleted duty's row goes with the next complete run.
-- The text columns follow duly_duty's and duly_dispatch_set_aside's.
CREATE TABLE duly_dispatch_fault (
    organization_id text NOT NULL,
    duty_id         text NOT NULL,
    reason          text NOT NULL,
    detail          text NOT NULL,
    -- The clock of the run the fault began in, and that run.
    since           timestamptz NOT NULL,
    since_run       bigint NOT NULL REFERENCES duly_dispatch_run (id),
    PRIMARY KEY (organization_id, duty_id),
    -- The closed list of docs/contract.md#faults (plan.FaultReason).
    CONSTRAINT duly_dispatch_fault_reason
        CHECK (reason IN ('unknown_form', 'no_frequency', 'unknown_frequency', 'invalid_cadence'))
);

-- The run records faults and removes those that ended; it updates no row
-- (a duty still faulted keeps the row its fault began with).
DO $$
BEGIN
    EXECUTE format('GRANT SELECT, INSERT, DELETE ON duly_dispatch_fault TO %I',
                   duly_dispatcher_role());
END
$$;
