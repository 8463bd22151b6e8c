-- The dispatcher's rights belong to this database alone.
--
-- Migration 0005 granted them to duly_dispatcher, a role of the whole cluster
-- that every migrated database grants to: a login in it could connect to any
-- other stack's database on the same cluster and read and write its duties,
-- tasks and ledger. From here on each database has a role of its own, named
-- after it with a random suffix (a role left behind by a dropped database of
-- the same name is never reused), recorded by duly_dispatcher_role():
--   every privilege duly_dispatcher held on this database's tables moves to
--   that role (0005's grants, and those of any migration before this one);
--   PUBLIC loses CONNECT on this database, and the role alone is given it, so
--   no other stack's login can even open a session here.
-- The migration step (migrate_resource.py) makes the stack's login a member
-- of this role only. Later migrations grant to duly_dispatcher_role(), e.g.
--   EXECUTE format('GRANT SELECT ON duly_x TO %I', duly_dispatcher_role());
-- Other logins that read or write this database (the application that owns
-- the duties) need their own GRANT CONNECT now (docs/deploy.md).
DO $$
DECLARE
    grantee name;
    shared oid := to_regrole('duly_dispatcher');
    relation record;
    column_grant record;
BEGIN
    -- Applied again only where the ledger was lost: this database's role stays its role.
    IF to_regprocedure('duly_dispatcher_role()') IS NOT NULL THEN
        EXECUTE 'SELECT duly_dispatcher_role()' INTO grantee;
    END IF;
    IF grantee IS NULL OR to_regrole(quote_ident(grantee)) IS NULL THEN
        grantee := format(
            'duly_dispatcher_%s_%s',
            left(regexp_replace(lower(current_database()), '[^a-z0-9_]', '_', 'g'), 32),
            left(md5(random()::text || clock_timestamp()::text), 8)
        );
        EXECUTE format('CREATE ROLE %I NOLOGIN', grantee);
    END IF;
    EXECUTE format(
        'CREATE OR REPLACE FUNCTION duly_dispatcher_role() RETURNS name LANGUAGE sql IMMUTABLE'
        ' AS %L', format('SELECT %L::name', grantee)
    );
    REVOKE EXECUTE ON FUNCTION duly_dispatcher_role() FROM PUBLIC;

    IF shared IS NOT NULL THEN
        FOR relation IN
            SELECT c.oid::regclass AS name, string_agg(DISTINCT a.privilege_type, ', ') AS rights,
                   CASE c.relkind WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END AS kind
            FROM pg_class c, aclexplode(c.relacl) a
            WHERE a.grantee = shared
            GROUP BY c.oid, c.relkind
        LOOP
            EXECUTE format(
                'GRANT %s ON %s %s TO %I', relation.rights, relation.kind, relation.name, grantee
            );
        END LOOP;
        FOR column_grant IN
            SELECT t.attrelid::regclass AS relation, t.attname, a.privilege_type
            FROM pg_attribute t, aclexplode(t.attacl) a
            WHERE a.grantee = shared
        LOOP
            EXECUTE format(
                'GRANT %s (%I) ON %s TO %I',
                column_grant.privilege_type, column_grant.attname, column_grant.relation, grantee
            );
        END LOOP;
        -- Revoking a table's privileges revokes its column privileges too.
        FOR relation IN
            SELECT c.oid::regclass AS name,
                   CASE c.relkind WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END AS kind
            FROM pg_class c
            WHERE EXISTS (SELECT 1 FROM aclexplode(c.relacl) a WHERE a.grantee = shared)
               OR EXISTS (
                   SELECT 1 FROM pg_attribute t, aclexplode(t.attacl) a
                   WHERE t.attrelid = c.oid AND a.grantee = shared
               )
        LOOP
            EXECUTE format('REVOKE ALL ON %s %s FROM duly_dispatcher', relation.kind, relation.name);
        END LOOP;
    END IF;

    EXECUTE format('REVOKE CONNECT ON DATABASE %I FROM PUBLIC', current_database());
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), grantee);
    -- A role that does not own the database gets a warning, not an error, from
    -- REVOKE: checked, so a database left open to every login fails the deploy.
    IF has_database_privilege('public', current_database(), 'CONNECT') THEN
        RAISE EXCEPTION 'PUBLIC can still connect to database %; expected the migrating role '
            '(%) to own it, so that only % may connect', current_database(), current_user, grantee;
    END IF;
END
$$;
