import type { Env, Job } from "../env";
import { deliverWebhook, rollupUsage, PermanentFailure } from "../jobs";

// max_retries 5, then atlas-dlq (wrangler.toml). Backoff: 2^attempts * 10 s.
// Delivery is at-least-once: handlers must be idempotent (delivered_events table).
export async function queue(batch: MessageBatch<Job>, env: Env): Promise<void> {
  for (const msg of batch.messages) {
    try {
      if (msg.body.type === "webhook") await deliverWebhook(env, msg.body);
      else if (msg.body.type === "usage_rollup") await rollupUsage(env, msg.body);
      msg.ack();
    } catch (err) {
      if (err instanceof PermanentFailure) {
        msg.ack(); // e.g. tenant endpoint answered 410: retrying cannot help
        continue;
      }
      msg.retry({ delaySeconds: 2 ** msg.attempts * 10 });
    }
  }
}
