import { defineWorkersConfig } from "@cloudflare/vitest-pool-workers/config";

// Tests run inside workerd with real D1 / R2 / Queue bindings from wrangler.toml.
export default defineWorkersConfig({
  test: {
    poolOptions: {
      workers: {
        wrangler: { configPath: "./wrangler.toml" },
        isolatedStorage: true,
        miniflare: { d1Databases: ["DB"], r2Buckets: ["BLOBS"] },
      },
    },
  },
});
