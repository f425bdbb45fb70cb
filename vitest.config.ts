import "./node20-polyfills.mjs";
import path from "node:path";
import { defineConfig } from "vitest/config";

const alias = { "@": path.resolve(import.meta.dirname) };

// Projects: `unit` (no services), `integration` (real Postgres + Redis, started by the global setup when
// DATABASE_URL / REDIS_URL are absent), `docker` (a real Docker engine; fails in CI when none is
// reachable, skips with a printed reason elsewhere), `contract` (every driver through the one backend
// contract suite of test/contract), `e2b` (the E2B driver and the loopback E2B emulator
// of test/fixtures/e2b-emulator, whose sandboxes are Docker containers: same Docker rule) and `e2e`.
export default defineConfig({
  resolve: { alias },
  test: {
    projects: [
      {
        resolve: { alias },
        test: { name: "unit", include: ["test/unit/**/*.test.ts"], testTimeout: 30_000 },
      },
      {
        resolve: { alias },
        test: {
          name: "integration",
          include: ["test/integration/**/*.test.ts"],
          globalSetup: ["test/setup/services.ts"],
          testTimeout: 60_000,
          hookTimeout: 120_000,
          fileParallelism: false,
        },
      },
      {
        resolve: { alias },
        test: {
          name: "docker",
          include: ["test/docker/**/*.test.ts"],
          testTimeout: 180_000,
          hookTimeout: 600_000,
          fileParallelism: false,
        },
      },
      {
        resolve: { alias },
        test: {
          name: "e2b",
          include: ["test/e2b/**/*.test.ts"],
          testTimeout: 180_000,
          hookTimeout: 600_000,
          fileParallelism: false,
        },
      },
      {
        // The backend contract (test/contract/README.md): one file per driver, run one after the other.
        // Each file applies its backend's own rule: bubblewrap and Docker (the E2B emulator runs on Docker)
        // fail in CI when missing, and skip with the reason printed elsewhere.
        resolve: { alias },
        test: {
          name: "contract",
          include: ["test/contract/**/*.contract.test.ts"],
          testTimeout: 120_000,
          hookTimeout: 600_000,
          fileParallelism: false,
        },
      },
      {
        // Browser end-to-end: builds and starts the app (minutes), then drives /usr/bin/chromium.
        resolve: { alias },
        test: {
          name: "e2e",
          include: ["test/e2e/**/*.test.ts"],
          globalSetup: ["test/setup/services.ts"],
          testTimeout: 120_000,
          hookTimeout: 900_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
