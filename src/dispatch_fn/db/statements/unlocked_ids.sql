-- Those of %(ids)s whose duty row no other transaction holds locked against an
-- update. FOR NO KEY UPDATE is the lock the page's UPDATE of
-- last_dispatched_period takes; the task's foreign key check needs KEY SHARE,
-- which only FOR UPDATE blocks, and this finds those too. SKIP LOCKED answers
-- without waiting.
-- In autocommit the probe's own locks end with it (ADR 0003).
SELECT d.id
FROM duly_duty d
WHERE d.id = ANY(%(ids)s::text[])
FOR NO KEY UPDATE SKIP LOCKED
