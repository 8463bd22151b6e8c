"""PostgreSQL: connections, statements, migrations, the data layer, the ledger."""
