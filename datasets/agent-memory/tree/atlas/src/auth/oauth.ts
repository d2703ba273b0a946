import { createRemoteJWKSet, jwtVerify } from "jose";
import type { Context } from "hono";
import type { Env } from "../env";

// Tokens are issued by the identity provider (WorkOS); we only verify them.
const ISSUER = "https://auth.atlas.dev";
const AUDIENCE = "atlas-api";

export async function verifyAccessToken(env: Env, token: string) {
  const jwks = createRemoteJWKSet(new URL(env.WORKOS_JWKS_URL));
  const { payload } = await jwtVerify(token, jwks, {
    issuer: ISSUER,
    audience: AUDIENCE,
    algorithms: ["RS256"],
  });
  return payload;
}

export async function callback(c: Context<{ Bindings: Env }>) {
  const code = c.req.query("code");
  const verifier = c.req.header("cookie")?.match(/pkce=([^;]+)/)?.[1];
  if (!code || !verifier) return c.json({ code: "INVALID_CALLBACK" }, 400);
  const session = await exchangeCode(c.env, code, verifier);
  // ATL-611: must be Lax, Strict drops the cookie on the redirect back from the IdP.
  c.header("set-cookie", `atlas_session=${session.id}; Path=/; HttpOnly; Secure; SameSite=Lax`);
  return c.redirect("/dashboard");
}

declare function exchangeCode(env: Env, code: string, verifier: string): Promise<{ id: string }>;
