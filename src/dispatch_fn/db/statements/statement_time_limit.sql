-- The time the next statement of this transaction may run, in milliseconds:
-- what is left before the run's deadline, when that comes before the
-- session's statement_timeout (ADR 0009). Local to the page's transaction, so
-- the session's own timeout is back once it ends, whatever happened.
SELECT set_config('statement_timeout', %(ms)s::text, true)
