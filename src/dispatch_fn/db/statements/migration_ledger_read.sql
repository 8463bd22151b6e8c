-- Every applied migration and its recorded checksum ('' for one applied before
-- checksums were recorded). Slot: {ledger}.
SELECT version, coalesce(checksum, '') AS checksum FROM {ledger}
