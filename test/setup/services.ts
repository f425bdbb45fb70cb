import { randomBytes } from "node:crypto";
import { rm } from "node:fs/promises";
import path from "node:path";
import type { TestProject } from "vitest/node";
import { dropDatabase, ensureDatabase, migrateDeploy, withDatabase } from "@/scripts/services/database";
import { deleteRedisKeys } from "@/scripts/services/redis";
import { startLocalServices } from "@/scripts/services/local-services";
import { cloneDatabase, TEST_TEMPLATE_VARIABLE } from "@/scripts/services/test-databases";

/**
 * Global setup of the `integration` and `e2e` projects (once per project): real PostgreSQL and Redis.
 *
 * - DATABASE_URL / REDIS_URL given (CI, or a developer's own services): used as servers only. The tests
 *   get a FRESH database `berth_test_<random>` (migrated with `prisma migrate deploy`, or under `npm test`
 *   copied from the template it migrated once for all its runs; dropped at the end) and a fresh Redis key prefix (its keys deleted at the end), so developer data is never touched.
 * - Not given: embedded PostgreSQL and the redis-server from PATH, in a throw-away folder.
 *
 * Tests read the result from process.env (DATABASE_URL, REDIS_URL, BERTH_REDIS_PREFIX), which
 * services-env.ts sets in each test file from its own project's `inject("services")` (the main process'
 * env holds only the last project's), and through `inject("services")`.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const runId = randomBytes(4).toString("hex");
  const repoRoot = path.resolve(import.meta.dirname, "..", "..");
  const dataDir = path.join(repoRoot, ".data", "test-services", runId);
  const log = (line: string) => {
    if (process.env.BERTH_TEST_SERVICES_VERBOSE) console.log(`[test services] ${line}`);
  };

  const services = await startLocalServices({
    dataDir,
    databaseUrl: process.env.DATABASE_URL,
    redisUrl: process.env.REDIS_URL,
    databaseName: "postgres",
    postgresPassword: randomBytes(18).toString("base64url"),
    redisPassword: randomBytes(18).toString("base64url"),
    persistent: false,
    log,
  });

  const databaseUrl = withDatabase(services.databaseUrl, `berth_test_${runId}`);
  const redisPrefix = `berth_test_${runId}`;
  // `npm test` migrates one template for all its runs (scripts/services/test-databases.ts) on the given
  // server; the check after the copy is one query that finds every migration applied.
  const template = services.embedded.postgres ? undefined : process.env[TEST_TEMPLATE_VARIABLE];
  try {
    if (template) await cloneDatabase(databaseUrl, template);
    else await ensureDatabase(databaseUrl);
    await migrateDeploy(databaseUrl);
  } catch (error) {
    await dropDatabase(databaseUrl).catch(() => undefined);
    await services.stop();
    throw error;
  }

  Object.assign(process.env, {
    NODE_ENV: "test",
    DATABASE_URL: databaseUrl,
    REDIS_URL: services.redisUrl,
    BERTH_REDIS_PREFIX: redisPrefix,
    // Test-only secrets, fresh per run (never the installation's .data/secrets.json).
    BERTH_AUTH_SECRET: process.env.BERTH_AUTH_SECRET ?? randomBytes(32).toString("base64url"),
    BERTH_ENCRYPTION_KEY: process.env.BERTH_ENCRYPTION_KEY ?? randomBytes(32).toString("base64"),
  });
  project.provide("services", {
    databaseUrl,
    redisUrl: services.redisUrl,
    redisPrefix,
    embedded: services.embedded,
  });
  log(`database ${databaseUrl.replace(/:[^:@/]*@/, ":***@")}, redis prefix ${redisPrefix}`);

  return async () => {
    await dropDatabase(databaseUrl).catch((error: unknown) =>
      console.warn("could not drop the test database", error),
    );
    // With the prefixes tests derive from the run's (`berth_test_<run>-<test>`); on a Cluster too.
    if (!services.embedded.redis) await deleteRedisKeys(services.redisUrl, redisPrefix);
    await services.stop();
    await rm(dataDir, { recursive: true, force: true });
  };
}

declare module "vitest" {
  export interface ProvidedContext {
    services: {
      databaseUrl: string;
      redisUrl: string;
      redisPrefix: string;
      embedded: { postgres: boolean; redis: boolean };
    };
  }
}
