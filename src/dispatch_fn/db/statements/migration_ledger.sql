-- The migration ledger (dispatch_fn.db.migrate): one row per applied file, with
-- the SHA-256 of its text. Slot: {ledger}, the ledger's name (migrate.LEDGER).
-- Ledgers written before checksums were recorded gain the column.
CREATE TABLE IF NOT EXISTS {ledger} (
    version text PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now(),
    checksum text
);
ALTER TABLE {ledger} ADD COLUMN IF NOT EXISTS checksum text;
