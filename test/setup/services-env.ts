import { inject } from "vitest";

/**
 * Per-file setup of the projects with the services global setup (`integration`, `e2e`). Vitest runs one
 * global setup per project in one main process, so `process.env` ends up holding the LAST project's
 * database and Redis prefix and every worker inherits those: the integration tests' in-process workers
 * then took the e2e servers' jobs from the shared queues (a stop or purge run against another data
 * directory, a stalled job when that test closed its workers). Each file gets its own project's services,
 * and a connection pool small enough for every test process to fit in the server's connections.
 */
const services = inject("services");
Object.assign(process.env, {
  DATABASE_URL: services.databaseUrl,
  REDIS_URL: services.redisUrl,
  BERTH_REDIS_PREFIX: services.redisPrefix,
  // Every process a test starts (API replicas, workers, the e2e server) inherits this. At the default
  // of 20 connections each, a multi-process integration test (two APIs, two workers, under 200 concurrent
  // requests) beside the e2e server exhausted PostgreSQL's 100 connections: the e2e server's requests then
  // waited (and were retried as UNAVAILABLE) until the browser gave up.
  DATABASE_POOL_MAX: process.env.DATABASE_POOL_MAX ?? "8",
});
