-- Duties as compliance teams write them (SPEC §2a, §3, §4): the review gate,
-- grace, due dates after the period, business-day rolls.
--
-- Every column added here is metadata only on PostgreSQL 11 and later: a
-- constant default is stored once in the catalog, not written into each row,
-- so this takes a brief ACCESS EXCLUSIVE lock and no table rewrite however
-- many duties and tasks exist. Existing duties read as approved (the default),
-- so they keep being dispatched.
--
-- Like form and status, the new cadence columns carry no CHECK on their
-- values: a duty with an unknown roll or calendar, or an offset out of range,
-- must still be storable so that the dispatcher reports it as a fault
-- (invalid_cadence) instead of the write failing upstream.

ALTER TABLE duly_duty
    ADD COLUMN review_status     text DEFAULT 'approved',
    ADD COLUMN grace_days        integer NOT NULL DEFAULT 0,
    ADD COLUMN due_offset_months integer NOT NULL DEFAULT 0,
    ADD COLUMN due_roll          text NOT NULL DEFAULT 'none',
    ADD COLUMN holiday_calendar  text;

-- late_after has no constant to default to (it is each task's due date plus
-- the grace its duty had), so it arrives nullable and is filled in batches by
-- 0006_task_late_after.sql, outside any long transaction. Until then this
-- NOT VALID check already holds every new row to it (the dispatcher always
-- writes it) without scanning the existing ones.
ALTER TABLE duly_task ADD COLUMN late_after date;
ALTER TABLE duly_task
    ADD CONSTRAINT duly_task_late_after_set CHECK (late_after IS NOT NULL) NOT VALID;
