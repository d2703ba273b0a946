-- 0001_init_tenants.sql  (applied with `wrangler d1 migrations apply DB --remote`)
CREATE TABLE tenants (
  id         INTEGER PRIMARY KEY,
  name       TEXT    NOT NULL,
  plan       TEXT    NOT NULL DEFAULT 'free' CHECK (plan IN ('free', 'pro', 'enterprise')),
  region     TEXT    NOT NULL DEFAULT 'us',
  created_at INTEGER NOT NULL,
  deleted_at INTEGER
);
CREATE INDEX tenants_plan ON tenants (plan);
