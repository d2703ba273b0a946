import { Hono } from "hono";
import { zValidator } from "@hono/zod-validator";
import { z } from "zod";
import type { Env } from "./env";
import { checkRateLimit } from "./ratelimit";
import { callback } from "./auth/oauth";
import { queue } from "./queues/consumer";

const app = new Hono<{ Bindings: Env }>();

app.get("/healthz", (c) => c.text("ok")); // exempt from rate limiting

app.post("/auth/callback", callback);

app.patch(
  "/v1/tenants/:id",
  zValidator("json", z.object({ name: z.string().min(1).max(120).optional() })),
  async (c) => {
    const body = c.req.valid("json");
    return c.json({ id: c.req.param("id"), ...body });
  },
);

export default { fetch: app.fetch, queue };
export { checkRateLimit };
