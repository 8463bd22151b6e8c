-- The rules every statement that reads duly_duty shares, each written once:
-- which duties a run dispatches, which offsets and grace it accepts, and
-- which duties a run's scope names. The statements under statements/ call
-- them by name rather than spelling the rules out.
--
-- Each is a single SELECT with no FROM, IMMUTABLE and not STRICT, so the
-- planner inlines its body into the calling statement before it plans it: a
-- call in a WHERE is planned as the expression itself. That keeps the partial
-- index duly_duty_dispatchable_approved (migration 0006) in use, its predicate
-- being duly_dispatchable's body word for word, and lets a scope's bound
-- parameters fold away where they are null (tests/db/test_statements.py
-- holds EXPLAIN to both). EXECUTE is PUBLIC's by default, the dispatcher's role
-- included. OR REPLACE: the functions belong to the schema, not to a table.

-- plan.classify's dispatchable duties: active, recurring and approved. Null
-- where a column is null, as the predicate it replaces was: a statement that
-- counts the others says coalesce(..., false).
CREATE OR REPLACE FUNCTION duly_dispatchable(status text, form text, review_status text)
    RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
SELECT status = 'active' AND form = 'recurring' AND review_status = 'approved'
$$;

-- The offsets periods.check_due_rule and the grace periods.check_grace_days
-- accept: after the period 0 to MAX_MONTHS_AFTER_PERIOD (24) months and 0 to
-- MAX_DAYS_AFTER_PERIOD (366) days; no months on the other anchors; a grace of
-- 0 to MAX_GRACE_DAYS (366) days. The limits are periods' constants:
-- tests/db/test_migrations.py fails if the two drift apart.
CREATE OR REPLACE FUNCTION duly_due_rule_in_range(
    due_anchor text, due_offset_days integer, due_offset_months integer, grace_days integer)
    RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
SELECT CASE WHEN due_anchor = 'after_period_end'
            THEN due_offset_months BETWEEN 0 AND 24 AND due_offset_days BETWEEN 0 AND 366
            ELSE due_offset_months = 0 END
       AND grace_days BETWEEN 0 AND 366
$$;

-- store.Scope over one duty: its organisation, its id among a list, its id
-- after a continuation's resume point; a null limit does not limit. Bound as
-- parameters, each null test is a constant once the statement is planned
-- with its values, so what remains is the plain comparison an index can use.
CREATE OR REPLACE FUNCTION duly_in_scope(
    id text, organization_id text,
    scope_organization_id text, scope_duty_ids text[], scope_resume_after text)
    RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
SELECT (scope_organization_id IS NULL OR organization_id = scope_organization_id)
   AND (scope_duty_ids IS NULL OR id = ANY(scope_duty_ids))
   AND (scope_resume_after IS NULL OR id > scope_resume_after)
$$;
