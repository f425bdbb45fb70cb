import { z } from "zod";
import { parseEnv, readProcessEnv, type RawEnv } from "./env";

const ZRedisEnv = z.object({
  REDIS_URL: z
    .string({ error: "required (or run `npm start`, which starts redis-server from PATH when it is unset)" })
    .regex(/^rediss?:\/\//, "must be a redis:// or rediss:// URL"),
  // Every Redis key Berth writes (BullMQ queues, heartbeats, the audit buffer) starts with this, so
  // test runs and several installations can share one Redis without seeing each other's data.
  BERTH_REDIS_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_-]+$/, "letters, digits, _ and - only")
    .default("berth"),
});

export type RedisConfig = { readonly url: string; readonly prefix: string };

export function loadRedisConfig(env: RawEnv = readProcessEnv()): RedisConfig {
  const parsed = parseEnv(ZRedisEnv, env, "redis");
  return { url: parsed.REDIS_URL, prefix: parsed.BERTH_REDIS_PREFIX };
}
