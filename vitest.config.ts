import "./node20-polyfills.mjs";
import path from "node:path";
import { configDefaults, defineConfig } from "vitest/config";

const alias = { "@": path.resolve(import.meta.dirname) };

// The drivers' own projects, by driver name. `local` (bubblewrap) needs no engine and runs its files side
// by side, as `unit` does; the others start containers (the E2B emulator's sandboxes and the Kubernetes
// emulator's Pods are Docker containers too) and run one file at a time.
const ENGINE_TIMEOUTS = { testTimeout: 180_000, hookTimeout: 600_000, fileParallelism: false };
const DRIVER_PROJECTS = {
  local: { testTimeout: 30_000 },
  docker: ENGINE_TIMEOUTS,
  e2b: ENGINE_TIMEOUTS,
  kubernetes: ENGINE_TIMEOUTS,
};

// Projects: `unit` (no services), `integration` (real Postgres + Redis, started by the global setup when
// DATABASE_URL / REDIS_URL are absent; also the drivers' test/drivers/<name>/integration/), one per driver
// under test/drivers/ (`local` needs bubblewrap; `docker`, `e2b` and `kubernetes` a real Docker engine:
// they fail in CI when it is missing, skip with a printed reason elsewhere), `contract` (the backend
// contract suite, once per driver, each with its backend's rule) and `e2e`.
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
    // Transformed modules persist in node_modules/.experimental-vitest-cache, keyed by content: npm test's
    // six Vitest runs (and every later one) share one transform of Berth's ~1,500 modules.
    experimental: { fsModuleCache: true },
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
          include: ["test/integration/**/*.test.ts", "test/drivers/*/integration/**/*.test.ts"],
          globalSetup: ["test/setup/services.ts"],
          setupFiles: ["test/setup/services-env.ts", "test/setup/process-reset.ts"],
          // Generous: four streams share two cores, and a load spike (a rehearsal beside other work) took
          // tests that run in 20-30 s just past 60 s. A passing test costs nothing extra for the margin.
          testTimeout: 120_000,
          hookTimeout: 120_000,
          fileParallelism: false,
        },
      },
      // One project per driver (test/drivers/README.md): its folder's tests, without the ones under
      // integration/ (those need Postgres and Redis and run in `integration`).
      ...Object.entries(DRIVER_PROJECTS).map(([name, timeouts]) => ({
        resolve: { alias },
        test: {
          name,
          isolate: false,
          include: [`test/drivers/${name}/**/*.test.ts`],
          exclude: [...configDefaults.exclude, `test/drivers/${name}/integration/**`],
          ...timeouts,
        },
      })),
      {
        // The backend contract (test/drivers/contract/README.md): one file per driver of its table
        // (drivers.ts), run side by side, each under its backend's rule: bubblewrap and Docker (the
        // E2B and Kubernetes emulators run on Docker) fail in CI when missing, and skip with the reason printed.
        resolve: { alias },
        test: {
          name: "contract",
          isolate: false,
          include: ["test/drivers/contract/**/*.test.ts"],
          testTimeout: 120_000,
          hookTimeout: 600_000,
        },
      },
      {
        // Browser end-to-end: builds and starts the app (minutes), then drives /usr/bin/chromium.
        resolve: { alias },
        test: {
          name: "e2e",
          isolate: false,
          include: ["test/e2e/**/*.test.ts"],
          // e2e-shared.ts: the one server and Chromium the files share, over services.ts' database and Redis.
          globalSetup: ["test/setup/services.ts", "test/setup/e2e-shared.ts"],
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
