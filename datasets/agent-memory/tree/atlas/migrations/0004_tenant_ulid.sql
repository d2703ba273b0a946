-- 0004_tenant_ulid.sql: public ids are ULIDs prefixed tnt_; the integer id stays internal.
ALTER TABLE tenants ADD COLUMN public_id TEXT;
UPDATE tenants SET public_id = 'tnt_' || upper(hex(randomblob(13))) WHERE public_id IS NULL; -- backfill, rewritten to ULIDs by scripts/backfill-ulids.ts
CREATE UNIQUE INDEX tenants_public_id ON tenants (public_id);
