import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { handleTrpcRequest } from "@/server/api/http-handler";
import { secretKeyFromBytes } from "@/server/auth/secrets";
import { type TenantScope } from "@/server/auth/scope";
import { getConfig } from "@/server/config/config";
import { createAgent } from "@/server/modules/agent/agent.data";
import { apiKeySecret, createApiKey } from "@/server/modules/api-key/api-key.service";
import { dropDatabase, ensureDatabase, migrateDeploy, withDatabase } from "@/scripts/services/database";
import { deleteRedisKeys } from "@/scripts/services/redis";
import { createTestTenant } from "@/test/integration/db/fixtures";
import { serveFetchHandler, type ServedHandler } from "@/test/integration/api/support/serve-fetch-handler";
import { Inflight } from "./inflight";
import { closeProcessBerth, processBerth } from "@/server/composition/process-berth";
import { processApiRuntime } from "@/server/api/composition";

const DEFAULT_DATABASE_URL = "postgresql://root@localhost/postgres?host=/var/run/postgresql";
const DEFAULT_REDIS_URL = "redis://127.0.0.1:6379";

/** Variables this bench sets for the Berth modules it composes (restored on close). */
const OWN_ENV = [
  "DATABASE_URL",
  "REDIS_URL",
  "BERTH_REDIS_PREFIX",
  "BERTH_AUTH_SECRET",
  "BERTH_ENCRYPTION_KEY",
  "BERTH_WORKSPACE_BASEDIR",
] as const;

export type BenchStack = {
  redisPrefix: string;
  /** The owner's scope (the API key's creator). */
  scope: TenantScope;
  /** A plain admin API key, sent as `Authorization: Bearer`. */
  apiKey: string;
  agentId: string;
  /** The real tRPC handler (the Next route's code path) on a loopback port. */
  berth: ServedHandler;
  /** Requests Berth's server (and the baseline's, which shares it) is still handling. */
  inflight: Inflight;
  close(): Promise<void>;
};

/**
 * The API as the app runs it, against the machine's PostgreSQL and Redis: a throwaway database
 * `berth_bench_<random>` (migrated like the integration tests' global setup, dropped WITH (FORCE) on close),
 * a fresh Redis prefix, a tenant with an owner, an admin API key and an agent.
 */
export async function startStack(): Promise<BenchStack> {
  const runId = randomBytes(4).toString("hex");
  const databaseUrl = withDatabase(process.env.DATABASE_URL ?? DEFAULT_DATABASE_URL, `berth_bench_${runId}`);
  const redisUrl = process.env.REDIS_URL ?? DEFAULT_REDIS_URL;
  const redisPrefix = `berth_bench_${runId}`;
  const basedir = await fs.mkdtemp(path.join(os.tmpdir(), "berth-bench-service-"));
  const savedEnv = Object.fromEntries(OWN_ENV.map((name) => [name, process.env[name]]));

  const steps: (() => Promise<unknown>)[] = [
    () => dropDatabase(databaseUrl),
    () => fs.rm(basedir, { recursive: true, force: true }),
  ];
  const close = async () => {
    for (const step of steps.reverse()) await step().catch((error: unknown) => console.warn(error));
    for (const name of OWN_ENV) {
      if (savedEnv[name] === undefined) delete process.env[name];
      else process.env[name] = savedEnv[name];
    }
  };
  try {
    await ensureDatabase(databaseUrl);
    await migrateDeploy(databaseUrl);
    // Server modules read their configuration lazily from process.env (composition roots), so setting it
    // here, before the process' Berth is first built, is enough. LOG_LEVEL stays the installation's
    // (info by default: nothing is logged per successful request).
    Object.assign(process.env, {
      DATABASE_URL: databaseUrl,
      REDIS_URL: redisUrl,
      BERTH_REDIS_PREFIX: redisPrefix,
      BERTH_AUTH_SECRET: randomBytes(32).toString("base64url"),
      BERTH_ENCRYPTION_KEY: randomBytes(32).toString("base64"),
      // Nothing is provisioned; the engine still wants a folder of its own.
      BERTH_WORKSPACE_BASEDIR: basedir,
    });
    steps.push(async () => {
      await closeProcessBerth();
      await deleteRedisKeys(redisUrl, redisPrefix);
    });

    const { auth } = processBerth().api;
    const tenant = await createTestTenant(auth);
    const key = await createApiKey(
      auth,
      tenant.scope,
      { name: "bench", role: "admin" },
      apiKeySecret(processBerth().config),
      processBerth().db,
    );
    const agent = await createAgent(
      tenant.scope,
      { name: "bench-agent", modelConfig: { provider: "openai-compatible", model: "bench" } },
      secretKeyFromBytes(getConfig().secrets.encryptionKey),
      processBerth().db,
    );
    const inflight = new Inflight();
    const berth = await serveFetchHandler((req) =>
      inflight.track(handleTrpcRequest(req, processApiRuntime())),
    );
    steps.push(() => berth.close());
    return {
      redisPrefix,
      scope: tenant.scope,
      apiKey: key.plainKey,
      agentId: agent.id,
      berth,
      inflight,
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}
