import { processRoot } from "@/server/shared/process-root";
import { loadDatabaseConfig, type DatabaseConfig } from "./database";
import { readProcessEnv, type RawEnv } from "./env";
import { loadHttpConfig, type HttpConfig } from "./http";
import { loadLoggingConfig, type LoggingConfig } from "./logging";
import { loadOperationsConfig, type OperationsConfig } from "./operations";
import { loadQuotaConfig, type QuotaConfig } from "./quotas";
import { loadRedisConfig, type RedisConfig } from "./redis";
import { loadSecretsConfig, type SecretsConfig } from "./secrets";
import { loadApiOnly, loadWorkersConfig, type WorkersConfig } from "./workers";

/** Everything Berth reads from its environment, parsed and typed. Built at composition roots only. */
export type BerthConfig = {
  readonly database: DatabaseConfig;
  readonly redis: RedisConfig;
  readonly http: HttpConfig;
  readonly secrets: SecretsConfig;
  readonly logging: LoggingConfig;
  readonly workers: WorkersConfig;
  /** `npm start` without in-process workers (BERTH_API_ONLY). */
  readonly apiOnly: boolean;
  readonly operations: OperationsConfig;
  readonly quotas: QuotaConfig;
};

/**
 * Parses the whole configuration, failing at boot with every missing or invalid variable named.
 * Pass `env` in tests; composition roots pass the result to `createBerth`.
 */
export function loadConfig(env: RawEnv = readProcessEnv()): BerthConfig {
  return {
    database: loadDatabaseConfig(env),
    redis: loadRedisConfig(env),
    http: loadHttpConfig(env),
    secrets: loadSecretsConfig(env),
    logging: loadLoggingConfig(env),
    workers: loadWorkersConfig(env),
    apiOnly: loadApiOnly(env),
    operations: loadOperationsConfig(env),
    quotas: loadQuotaConfig(env),
  };
}

/** The process root's configuration, for tests and bench/ only: server code is handed the root's. */
export function getConfig(): BerthConfig {
  return processRoot<{ config: BerthConfig }>().config;
}
