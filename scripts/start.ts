/**
 * `npm start`: Berth on one port, from a fresh clone. Composition root (reads process.env):
 * services (embedded when DATABASE_URL / REDIS_URL are unset) → secrets → migrations → first tenant and
 * admin → `next build` when needed → dashboard + API on PORT → workers in-process → graceful shutdown.
 */
import { createServer, type Server } from "node:http";
import path from "node:path";
import { z } from "zod";
import { AppError } from "@/server/shared/errors";
import { loadOrCreateLocalSecrets } from "./services/secrets";
import { startLocalServices, type LocalServices } from "./services/local-services";
import { migrateDeploy } from "./services/database";
import { buildState, nextBuild } from "./services/next-build";
import { RedisServerNotFoundError } from "./services/redis";
import { prepareIncomingRequest } from "./services/incoming-request";
import { parseTrustedProxies } from "@/server/api/client-address";
import { checkWorkspaceBackend, WorkspaceBackendUnavailableError } from "./services/workspace-backend";

const repoRoot = path.resolve(import.meta.dirname, "..");

const ZStartEnv = z.object({
  // Where embedded services keep their data and where generated secrets live (gitignored).
  BERTH_DATA_DIR: z.string().min(1).default(path.join(repoRoot, ".data")),
  // The first admin's email, used once when the installation has no tenant yet.
  BERTH_ADMIN_EMAIL: z.email().default("admin@berth.local"),
  // Skip the build check (CI and containers that built in an earlier step).
  BERTH_SKIP_BUILD: z.stringbool().default(false),
});

const say = (line: string) => process.stdout.write(`[berth] ${line}\n`);

async function main(): Promise<void> {
  const startEnv = ZStartEnv.parse(
    Object.fromEntries(Object.entries(process.env).filter(([, v]) => v !== "")),
  );
  // Before anything starts: the default backend must be able to confine agent commands.
  await checkWorkspaceBackend(say);
  const dataDir = path.resolve(startEnv.BERTH_DATA_DIR);
  const secrets = await loadOrCreateLocalSecrets(dataDir);

  const services = await startLocalServices({
    dataDir,
    databaseUrl: process.env.DATABASE_URL || undefined,
    redisUrl: process.env.REDIS_URL || undefined,
    databaseName: "berth",
    postgresPassword: secrets.postgresPassword,
    redisPassword: secrets.redisPassword,
    persistent: true,
    log: say,
  });

  // The rest of the process (config, Next route handlers, workers) reads these.
  process.env.DATABASE_URL = services.databaseUrl;
  process.env.REDIS_URL = services.redisUrl;
  process.env.BERTH_AUTH_SECRET ||= secrets.authSecret;
  process.env.BERTH_ENCRYPTION_KEY ||= secrets.encryptionKey;
  // Next expects a standard NODE_ENV for a production server.
  (process.env as Record<string, string>).NODE_ENV = "production";

  say("applying database migrations");
  await migrateDeploy(services.databaseUrl);

  // Imported after the environment is complete: these modules build singletons from it.
  const { getConfig } = await import("@/server/config/config");
  const { getLogger } = await import("@/server/logger");
  const config = getConfig();
  const log = getLogger().child({ process: "start" });

  const { getApiComposition } = await import("@/server/api/composition");
  const { bootstrapFirstTenant } = await import("@/server/modules/bootstrap/bootstrap.service");
  const bootstrap = await bootstrapFirstTenant(getApiComposition().auth, {
    email: startEnv.BERTH_ADMIN_EMAIL,
  });

  if (!startEnv.BERTH_SKIP_BUILD) {
    const state = await buildState(repoRoot);
    if (state !== "fresh") {
      say(
        state === "missing"
          ? "building the dashboard (first start)"
          : "sources changed: rebuilding the dashboard",
      );
      await nextBuild(repoRoot, process.env);
    }
  }

  const { default: next } = await import("next");
  const app = next({ dev: false, dir: repoRoot, hostname: config.http.host, port: config.http.port });
  const handle = app.getRequestHandler();
  await app.prepare();
  // Client address from trusted proxies only; unread upload bodies drained or the connection closed.
  const trustedProxies = parseTrustedProxies(config.http.trustedProxies);
  const server = createServer((req, res) => {
    prepareIncomingRequest(req, res, trustedProxies);
    void handle(req, res);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(config.http.port, config.http.host, () => resolve());
  });

  const { startWorkerRuntime } = await import("@/workers/runtime");
  const workers = await startWorkerRuntime({
    redis: config.redis,
    workers: config.workers,
    log,
    healthPort: null, // /api/health reports the workers of this process through their heartbeat
  });

  const url = config.http.baseUrl;
  say(`Berth is running at ${url} (health: ${url}/api/health)`);
  if (bootstrap.created) {
    say("");
    say("First start: created the tenant and its admin. Sign in at:");
    say(`  ${url}/sign-in`);
    say(`  email:    ${bootstrap.email}`);
    say(`  password: ${bootstrap.password}`);
    say("This password is shown only once and stored only as a hash. Change it after signing in.");
    say("");
  }
  installShutdown({ server, workers, services, log });
}

function installShutdown(parts: {
  server: Server;
  workers: { stop(): Promise<void> };
  services: LocalServices;
  log: { info(msg: string): void; error(obj: object, msg: string): void };
}): void {
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    say(`${signal}: shutting down (jobs in flight finish first)`);
    try {
      const closed = new Promise<void>((resolve) => parts.server.close(() => resolve()));
      parts.server.closeIdleConnections();
      await parts.workers.stop();
      const { closeSharedRedis } = await import("@/server/redis");
      const { closeSharedQueues } = await import("@/server/queue/queues");
      const { disconnectDb } = await import("@/server/db");
      const { closeAgentServices } = await import("@/server/modules/chat/chat.composition");
      await Promise.all([closeAgentServices(), closeSharedQueues(), closeSharedRedis(), disconnectDb()]);
      // Long-lived requests (SSE subscriptions) would hold close() open forever.
      parts.server.closeAllConnections();
      await closed;
      await parts.services.stop();
      say("stopped");
      process.exit(0);
    } catch (error) {
      parts.log.error({ err: error }, "unclean shutdown");
      await parts.services.stop().catch(() => undefined);
      process.exit(1);
    }
  };
  process.once("SIGINT", () => void stop("SIGINT"));
  process.once("SIGTERM", () => void stop("SIGTERM"));
}

main().catch((error: unknown) => {
  say(`failed to start: ${error instanceof Error ? error.message : String(error)}`);
  if (
    error instanceof Error &&
    error.stack &&
    !(error instanceof RedisServerNotFoundError) &&
    !(error instanceof WorkspaceBackendUnavailableError) &&
    // Configuration refusals (AppErrors) explain themselves; a stack trace would bury the message.
    !(error instanceof AppError)
  ) {
    process.stderr.write(`${error.stack}\n`);
  }
  process.exit(1);
});
