import { z } from "zod";
import { parseEnv, readProcessEnv, type RawEnv } from "./env";

const ZDatabaseEnv = z.object({
  DATABASE_URL: z
    .string({ error: "required (or run `npm start`, which starts an embedded PostgreSQL when it is unset)" })
    .regex(/^postgres(ql)?:\/\//, "must be a postgres:// or postgresql:// URL"),
});

export type DatabaseConfig = { readonly url: string };

export function loadDatabaseConfig(env: RawEnv = readProcessEnv()): DatabaseConfig {
  const parsed = parseEnv(ZDatabaseEnv, env, "database");
  return { url: parsed.DATABASE_URL };
}
