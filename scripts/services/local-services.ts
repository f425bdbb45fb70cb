import path from "node:path";
import { ensureDatabase } from "./database";
import { startEmbeddedPostgres, type RunningPostgres } from "./postgres";
import { startEmbeddedRedis, type RunningRedis } from "./redis";

export type LocalServices = {
  /** A URL to `databaseName` (created if missing) on the given or embedded server. */
  readonly databaseUrl: string;
  readonly redisUrl: string;
  /** Which services this process started (and will stop). */
  readonly embedded: { readonly postgres: boolean; readonly redis: boolean };
  stop(): Promise<void>;
};

/**
 * Postgres and Redis for `npm start` and the test setup: the given URLs when set, otherwise embedded
 * servers with their data under `dataDir` (`<dataDir>/postgres`, `<dataDir>/redis`). Shared by
 * scripts/start.ts and test/setup/services.ts so both behave the same on a fresh machine.
 */
export async function startLocalServices(options: {
  dataDir: string;
  databaseUrl?: string | undefined;
  redisUrl?: string | undefined;
  /** Database used on an embedded server (an external DATABASE_URL names its own). */
  databaseName: string;
  postgresPassword: string;
  redisPassword: string;
  /** false: the embedded Postgres deletes its data on stop (tests). */
  persistent: boolean;
  log: (line: string) => void;
}): Promise<LocalServices> {
  let postgres: RunningPostgres | undefined;
  let redis: RunningRedis | undefined;
  const stop = async () => {
    await Promise.allSettled([redis?.stop(), postgres?.stop()]);
  };
  try {
    let databaseUrl = options.databaseUrl;
    if (!databaseUrl) {
      options.log("DATABASE_URL is not set: starting the embedded PostgreSQL");
      postgres = await startEmbeddedPostgres({
        dataDir: path.join(options.dataDir, "postgres"),
        password: options.postgresPassword,
        persistent: options.persistent,
        log: options.log,
      });
      databaseUrl = postgres.urlFor(options.databaseName);
      await ensureDatabase(databaseUrl);
    }
    let redisUrl = options.redisUrl;
    if (!redisUrl) {
      options.log("REDIS_URL is not set: starting redis-server from PATH");
      redis = await startEmbeddedRedis({
        dataDir: path.join(options.dataDir, "redis"),
        password: options.redisPassword,
        log: options.log,
      });
      redisUrl = redis.url;
    }
    return { databaseUrl, redisUrl, embedded: { postgres: !!postgres, redis: !!redis }, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
