-- A migration applied before checksums were recorded: the file as it is now
-- becomes the record. Slot: {ledger}.
UPDATE {ledger} SET checksum = %(checksum)s WHERE version = %(version)s
