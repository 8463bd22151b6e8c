-- The deploy's custom resource: the dispatcher's login, created
-- once; its password and its one role follow (login_password.sql, login_grant.sql).
CREATE ROLE {login} LOGIN
