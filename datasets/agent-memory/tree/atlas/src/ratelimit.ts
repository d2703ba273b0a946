import type { Env } from "./env";

type Plan = "free" | "pro" | "enterprise";

// Workers Rate Limiting binding, one per plan (wrangler.toml [[ratelimits]]):
// free 60/min, pro 600/min, enterprise 3000/min. Counts are per colo and approximate.
export async function checkRateLimit(env: Env, publicId: string, plan: Plan): Promise<Response | null> {
  const limiter = { free: env.RL_FREE, pro: env.RL_PRO, enterprise: env.RL_ENTERPRISE }[plan];
  const { success } = await limiter.limit({ key: publicId });
  if (success) return null;
  const retryAfter = 60;
  return new Response(JSON.stringify({ error: "rate_limited", retry_after: retryAfter }), {
    status: 429,
    headers: { "content-type": "application/json", "retry-after": String(retryAfter) },
  });
}
