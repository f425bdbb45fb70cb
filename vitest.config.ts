import "./node20-polyfills.mjs";
import path from "node:path";
import { defineConfig } from "vitest/config";

const alias = { "@": path.resolve(import.meta.dirname) };

// Projects: `unit` (no services), `integration` (real Postgres + Redis, started by the global setup when
// DATABASE_URL / REDIS_URL are absent), `docker`, `e2b` and `kubernetes` (a real Docker engine; fail in
// CI when none is reachable, skip with a printed reason elsewhere: the E2B emulator's sandboxes and the
// Kubernetes emulator's Pods are Docker containers), `contract` (the backend contract suite, per driver,
// each file with its backend's rule) and `e2e`.
//
// No project isolates its files (`isolate: false`): each worker imports Berth's modules once for all the
// files it runs instead of once per file. Isolated, the rest of `integration` spent 92 s of its 275 s
// importing and 317 CPU-seconds in all; shared, 6 s of 158 s and 129 CPU-seconds (2 cores, one run each).
// It holds because no test mocks a module or changes the environment after its setup, every test makes
// its own tenants, folders, ports and Redis keys, and test/setup/process-reset.ts ends what a file built
// process-wide (engine, queues, connections) before the next file runs.
export default defineConfig({
  resolve: { alias },
  test: {
    projects: [
      {
        resolve: { alias },
        test: { name: "unit", isolate: false, include: ["test/unit/**/*.test.ts"], testTimeout: 30_000 },
      },
      {
        resolve: { alias },
        test: {
          name: "integration",
          isolate: false,
          include: ["test/integration/**/*.test.ts"],
          globalSetup: ["test/setup/services.ts"],
          setupFiles: ["test/setup/services-env.ts", "test/setup/process-reset.ts"],
          testTimeout: 60_000,
          hookTimeout: 120_000,
          fileParallelism: false,
        },
      },
      {
        resolve: { alias },
        test: {
          name: "docker",
          isolate: false,
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
          isolate: false,
          include: ["test/e2b/**/*.test.ts"],
          testTimeout: 180_000,
          hookTimeout: 600_000,
          fileParallelism: false,
        },
      },
      {
        // Kubernetes driver against the loopback API server emulator (test/fixtures/kube-apiserver), whose
        // Pods are Docker containers: same engine and image requirements (and CI failure) as `docker`.
        resolve: { alias },
        test: {
          name: "kubernetes",
          isolate: false,
          include: ["test/kubernetes/**/*.test.ts"],
          testTimeout: 180_000,
          hookTimeout: 600_000,
          fileParallelism: false,
        },
      },
      {
        // The backend contract (test/contract/README.md): one file per driver, run one after the other.
        // Each file applies its backend's own rule: bubblewrap and Docker (the E2B emulator runs on Docker,
        // and so does the Kubernetes emulator) fail in CI when missing, and skip with the reason printed.
        resolve: { alias },
        test: {
          name: "contract",
          isolate: false,
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
          isolate: false,
          include: ["test/e2e/**/*.test.ts"],
          globalSetup: ["test/setup/services.ts"],
          setupFiles: [
            "test/setup/services-env.ts",
            "test/setup/process-reset.ts",
            "test/setup/e2e-failure-output.ts",
            "test/setup/e2e-wait-timeout.ts",
          ],
          testTimeout: 120_000,
          hookTimeout: 900_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
