-- An existing role's rights beyond logging in, and every role it is a member
-- of: the migration step refuses to make a privileged role the dispatcher's login.
SELECT
    r.rolsuper AS superuser,
    r.rolcreaterole AS createrole,
    r.rolcreatedb AS createdb,
    r.rolreplication AS replication,
    r.rolbypassrls AS bypassrls,
    array(
        SELECT g.rolname::text
        FROM pg_auth_members m
        JOIN pg_roles g ON g.oid = m.roleid
        WHERE m.member = r.oid
        ORDER BY 1
    ) AS memberships
FROM pg_roles r
WHERE r.rolname = %(login)s
