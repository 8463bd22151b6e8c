-- An existing role's rights beyond logging in, and every role it is a member
-- of: the migration step refuses to make a privileged role the dispatcher's login.
SELECT
    r.rolsuper,
    r.rolcreaterole,
    r.rolcreatedb,
    r.rolreplication,
    r.rolbypassrls,
    array(
        SELECT g.rolname::text
        FROM pg_auth_members m
        JOIN pg_roles g ON g.oid = m.roleid
        WHERE m.member = r.oid
        ORDER BY 1
    )
FROM pg_roles r
WHERE r.rolname = %(login)s
