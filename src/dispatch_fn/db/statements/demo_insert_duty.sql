-- The demo: one duty it seeds, every column it sets named (the rest take their defaults).
INSERT INTO duly_duty (
    id, organization_id, name, form, status, owner_id, business_unit_id, source, frequency,
    timezone, due_anchor, due_offset_days, due_offset_months, due_roll, holiday_calendar,
    lead_days, grace_days, effective_from, effective_to, review_status
)
VALUES (
    %(id)s, %(organization_id)s, %(name)s, %(form)s, %(status)s, %(owner_id)s,
    %(business_unit_id)s, %(source)s, %(frequency)s, %(timezone)s, %(due_anchor)s,
    %(due_offset_days)s, %(due_offset_months)s, %(due_roll)s, %(holiday_calendar)s,
    %(lead_days)s, %(grace_days)s, %(effective_from)s, %(effective_to)s, %(review_status)s
)
