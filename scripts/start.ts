/**
 * `npm start`: Berth on one port, from a fresh clone. Composition root (reads process.env):
 * services (embedded when DATABASE_URL / REDIS_URL are unset) → secrets → migrations → first tenant and
 * admin → `next build` when needed → dashboard + API on PORT → workers in-process (none with
 * BERTH_API_ONLY=true: they run as `npm run workers`) → graceful shutdown.
 *
 * `npm run dev` (`--dev`): the same server around Next's development server (no build, hot reload), so
 * the terminal WebSocket works in development too; the workers run apart (`npm run workers`).
 */
import path from "node:path";
import { z } from "zod";
import { loadHttpConfig } from "@/server/config/http";
import { isAppError } from "@/server/shared/errors";
import { loadOrCreateLocalSecrets } from "./services/secrets";
import { startLocalServices, type LocalServices } from "./services/local-services";
import { recordRunningServices } from "./services/running-services";
import { migrateDeploy } from "./services/database";
import { buildState, nextBuild } from "./services/next-build";
import { RedisServerNotFoundError } from "./services/redis";
import type { BerthProcess } from "./berth-process";
import { checkWorkspaceBackend, WorkspaceBackendUnavailableError } from "./services/workspace-backend";

const repoRoot = path.resolve(import.meta.dirname, "..");

const ZStartEnv = z.object({
  // Where embedded services keep their data, generated secrets live and, unless BERTH_WORKSPACE_BASEDIR
  // says otherwise, the workspaces' folders are (gitignored).
  BERTH_DATA_DIR: z.string().min(1).default(path.join(repoRoot, ".data")),
  // The first admin's email, used once when the installation has no tenant yet.
  BERTH_ADMIN_EMAIL: z.email().default("admin@berth.local"),
  // Skip the build check (CI and containers that built in an earlier step).
  BERTH_SKIP_BUILD: z.stringbool().default(false),
});

const say = (line: string) => process.stdout.write(`[berth] ${line}\n`);
const development = process.argv.includes("--dev");

async function main(): Promise<void> {
  const startEnv = ZStartEnv.parse(
    Object.fromEntries(Object.entries(process.env).filter(([, v]) => v !== "")),
  );
  const dataDir = path.resolve(startEnv.BERTH_DATA_DIR);
  process.env.BERTH_DATA_DIR = dataDir;
  // Before anything starts: the default backend must be able to confine agent commands (its base directory
  // is the data folder's `workspaces/`, server/engine/engine-config.ts).
  await checkWorkspaceBackend(say);
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

  // From here on a signal must stop the embedded services: they are in their own process groups.
  const running: { berth?: BerthProcess; forgetServices?: () => Promise<void> } = {};
  installShutdown(
    { stop: async () => void (await Promise.allSettled([running.forgetServices?.(), services.stop()])) },
    () => running.berth,
  );

  // The rest of the process (config, Next route handlers, workers) reads these.
  process.env.DATABASE_URL = services.databaseUrl;
  process.env.REDIS_URL = services.redisUrl;
  process.env.BERTH_AUTH_SECRET ||= secrets.authSecret;
  process.env.BERTH_ENCRYPTION_KEY ||= secrets.encryptionKey;
  // Next expects a standard NODE_ENV for its server.
  (process.env as Record<string, string>).NODE_ENV = development ? "development" : "production";

  say(`database migrations: ${await migrateDeploy(services.databaseUrl)}`);
  // `npm run berth` on this machine finds the services here (the embedded ones are on free ports), and the
  // base URL its invitation links must use (a shell without this one's PORT would otherwise say 3000).
  running.forgetServices = await recordRunningServices(dataDir, {
    databaseUrl: services.databaseUrl,
    redisUrl: services.redisUrl,
    baseUrl: loadHttpConfig().baseUrl,
  });
  say(`services recorded in ${path.join(dataDir, "services.json")} for npm run berth`);

  // Imported after the environment is complete: its modules build the process' instances from it.
  const { startBerthProcess } = await import("./berth-process");
  const berth = await startBerthProcess({
    repoRoot,
    adminEmail: startEnv.BERTH_ADMIN_EMAIL,
    development,
    ensureBuild: async () => {
      // The development server compiles on demand.
      if (startEnv.BERTH_SKIP_BUILD || development) return;
      const state = await buildState(repoRoot);
      if (state === "fresh") return;
      say(
        state === "missing"
          ? "building the dashboard (first start)"
          : "sources changed: rebuilding the dashboard",
      );
      await nextBuild(repoRoot, process.env);
    },
  });
  running.berth = berth;
  const { url, bootstrap } = berth;
  say(`Berth is running at ${url} (health: ${url}/api/health)`);
  if (development) say("development server: run the workers with `npm run workers` in another terminal");
  else if (berth.apiOnly)
    say("API only (BERTH_API_ONLY): no workers in this process; jobs wait for `npm run workers`");
  if (bootstrap.created) {
    say("");
    say("First start: created the tenant and its admin. Sign in at:");
    say(`  ${url}/sign-in`);
    say(`  email:    ${bootstrap.email}`);
    say(`  password: ${bootstrap.password}`);
    say("This password is shown only once and stored only as a hash. Change it after signing in.");
    say("");
  }
}

/** Jobs in flight get this long to finish before the process gives up on a clean stop. */
const SHUTDOWN_DEADLINE_MS = 20_000;

/**
 * SIGINT or SIGTERM, to this process or its whole group (Ctrl-C; a process manager), stop it once: a
 * second delivery of the same stop (npm forwards the signal the terminal also sent to the group) is
 * ignored rather than left to Node's default, which would kill the process mid-shutdown. The embedded
 * services run in their own process groups, so they are still up until Berth has closed its connections.
 */
function installShutdown(
  services: Pick<LocalServices, "stop">,
  current: () => BerthProcess | undefined,
): void {
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    say(`${signal}: shutting down (jobs in flight finish first)`);
    // Still starting: nothing to close but the services.
    const berth = current();
    const fail = (message: string, error?: unknown) => {
      if (berth) berth.log.error({ err: error }, message);
      else say(`${message}${error instanceof Error ? `: ${error.message}` : ""}`);
    };
    const deadline = setTimeout(() => {
      fail(`unclean shutdown: not stopped within ${SHUTDOWN_DEADLINE_MS / 1000} s`);
      void services.stop().finally(() => process.exit(1));
    }, SHUTDOWN_DEADLINE_MS);
    try {
      if (!berth) {
        await services.stop();
        say("stopped before Berth was running");
        process.exit(1);
      }
      await berth.close();
      await services.stop();
      clearTimeout(deadline);
      say("stopped");
      process.exit(0);
    } catch (error) {
      fail("unclean shutdown", error);
      await services.stop().catch(() => undefined);
      process.exit(1);
    }
  };
  for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => void stop(signal));
}

main().catch((error: unknown) => {
  say(`failed to start: ${error instanceof Error ? error.message : String(error)}`);
  if (
    error instanceof Error &&
    error.stack &&
    !(error instanceof RedisServerNotFoundError) &&
    !(error instanceof WorkspaceBackendUnavailableError) &&
    // Configuration refusals (AppErrors) explain themselves; a stack trace would bury the message.
    !isAppError(error)
  ) {
    process.stderr.write(`${error.stack}\n`);
  }
  process.exit(1);
});
