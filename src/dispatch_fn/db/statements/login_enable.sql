-- The deploy's custom resource: a login that exists already may log
-- in again, whatever an operator changed.
ALTER ROLE {login} LOGIN
