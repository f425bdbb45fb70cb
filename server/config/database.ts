import { z } from "zod";
import { parseEnv, readProcessEnv, type RawEnv } from "./env";

const ZDatabaseEnv = z.object({
  DATABASE_URL: z
    .string({ error: "required (or run `npm start`, which starts an embedded PostgreSQL when it is unset)" })
    .regex(/^postgres(ql)?:\/\//, "must be a postgres:// or postgresql:// URL"),
  DATABASE_POOL_MAX: z.coerce.number().int().min(1).max(500).default(20),
  DATABASE_TX_MAX_WAIT_MS: z.coerce.number().int().min(100).max(120_000).default(15_000),
});

export type DatabaseConfig = {
  readonly url: string;
  /** Connections per process. */
  readonly poolMax: number;
  /**
   * How long an interactive transaction may wait for a pooled connection. Prisma's default (2 s) turns a
   * burst (many chat turns starting at once on one process) into failed turns; queueing is better.
   */
  readonly txMaxWaitMs: number;
};

export function loadDatabaseConfig(env: RawEnv = readProcessEnv()): DatabaseConfig {
  const parsed = parseEnv(ZDatabaseEnv, env, "database");
  return {
    url: parsed.DATABASE_URL,
    poolMax: parsed.DATABASE_POOL_MAX,
    txMaxWaitMs: parsed.DATABASE_TX_MAX_WAIT_MS,
  };
}
