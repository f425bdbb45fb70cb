import { inject } from "vitest";

/**
 * Per-file setup of the projects with the services global setup (`integration`, `e2e`). Vitest runs one
 * global setup per project in one main process, so `process.env` ends up holding the LAST project's
 * database and Redis prefix and every worker inherits those: the integration tests' in-process workers
 * then took the e2e servers' jobs from the shared queues (a stop or purge run against another data
 * directory, a stalled job when that test closed its workers). Each file gets its own project's services.
 */
const services = inject("services");
Object.assign(process.env, {
  DATABASE_URL: services.databaseUrl,
  REDIS_URL: services.redisUrl,
  BERTH_REDIS_PREFIX: services.redisPrefix,
});
