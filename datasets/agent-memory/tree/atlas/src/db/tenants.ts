import type { Env } from "../env";

export interface Tenant {
  public_id: string; // tnt_<ULID>
  name: string;
  plan: "free" | "pro" | "enterprise";
  region: string;
}

// D1 read replication: every request runs in a session; the bookmark round-trips in the
// x-d1-bookmark header so a client sees its own writes on the next request.
export function session(env: Env, bookmark: string | null) {
  return env.DB.withSession(bookmark ?? "first-unconstrained");
}

export async function getTenant(
  db: D1DatabaseSession,
  publicId: string,
): Promise<{ ok: true; tenant: Tenant } | { ok: false; code: "TENANT_NOT_FOUND" }> {
  const row = await db
    .prepare("SELECT public_id, name, plan, region FROM tenants WHERE public_id = ?1 AND deleted_at IS NULL")
    .bind(publicId)
    .first<Tenant>();
  return row ? { ok: true, tenant: row } : { ok: false, code: "TENANT_NOT_FOUND" };
}

export function tenantScoped(db: D1DatabaseSession, tenantId: number, sql: string) {
  if (!/tenant_id\s*=\s*\?1/.test(sql)) throw new Error("tenant-scoped query must filter tenant_id = ?1");
  return db.prepare(sql).bind(tenantId);
}
