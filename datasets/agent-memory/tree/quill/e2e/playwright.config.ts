import { defineConfig, devices } from '@playwright/test';

const nightly = !!process.env.QUILL_NIGHTLY;

export default defineConfig({
  testDir: './tests',
  fullyParallel: true,
  retries: process.env.CI ? 1 : 0,
  reporter: process.env.CI ? [['blob'], ['github']] : 'list',
  use: { baseURL: 'http://localhost:5173', trace: 'on-first-retry' },
  globalSetup: './global-setup.ts',
  projects: [
    { name: 'chromium', use: { ...devices['Desktop Chrome'] } },
    { name: 'firefox', use: { ...devices['Desktop Firefox'] } },
    // webkit was ~70% of the flake budget; nightly only since March 2026.
    ...(nightly ? [{ name: 'webkit', use: { ...devices['Desktop Safari'] } }] : []),
  ],
});
