-- Whether the migration ledger exists yet (a database never migrated has none);
-- the parameter is its name, migrate.LEDGER.
SELECT to_regclass(%(ledger)s) IS NOT NULL AS found
