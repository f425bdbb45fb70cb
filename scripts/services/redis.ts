import { spawn } from "node:child_process";
import { access, chmod, constants, mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { Redis, type Cluster } from "ioredis";
import { createRedisConnection } from "@/server/redis";
import { findFreePort } from "./ports";
import { retryUntil } from "./retry";

export type RunningRedis = {
  readonly url: string;
  stop(): Promise<void>;
};

export class RedisServerNotFoundError extends Error {
  constructor() {
    super(
      "REDIS_URL is not set and no `redis-server` was found on PATH.\n" +
        "  Install one (Debian/Ubuntu: `sudo apt-get install redis-server`; macOS: `brew install redis`),\n" +
        "  or point Berth at an existing Redis: `REDIS_URL=redis://host:6379 npm start`.",
    );
    this.name = "RedisServerNotFoundError";
  }
}

/** The `redis-server` executable on PATH, or undefined. */
export async function findRedisServer(envPath = process.env.PATH ?? ""): Promise<string | undefined> {
  for (const dir of envPath.split(path.delimiter).filter(Boolean)) {
    const candidate = path.join(dir, "redis-server");
    if (
      await access(candidate, constants.X_OK).then(
        () => true,
        () => false,
      )
    )
      return candidate;
  }
  return undefined;
}

/**
 * Runs the `redis-server` found on PATH with its data (AOF) in `dataDir`, on a free loopback port and
 * behind a password. The config file carries the password (mode 0600), so it never shows up in `ps`.
 */
export async function startEmbeddedRedis(options: {
  dataDir: string;
  password: string;
  log: (line: string) => void;
  /** Where to look for redis-server (tests use it to simulate a machine without one). */
  envPath?: string;
}): Promise<RunningRedis> {
  const binary = await findRedisServer(options.envPath);
  if (!binary) throw new RedisServerNotFoundError();

  const dataDir = path.resolve(options.dataDir);
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const port = await findFreePort();
  const configFile = path.join(dataDir, "redis.conf");
  await writeFile(
    configFile,
    [
      `port ${port}`,
      "bind 127.0.0.1",
      `dir ${JSON.stringify(dataDir)}`,
      `requirepass ${JSON.stringify(options.password)}`,
      // Durable queue state: BullMQ jobs must survive a restart; never evict keys under memory pressure.
      "appendonly yes",
      "appendfsync everysec",
      'save ""',
      "maxmemory-policy noeviction",
      "daemonize no",
      "logfile redis.log",
      "",
    ].join("\n"),
    { mode: 0o600 },
  );
  await chmod(configFile, 0o600);

  // Its own process group: a Ctrl-C or a group SIGTERM meant for Berth must not stop Redis under the
  // workers' feet; Berth stops it last, after closing its connections (see stop()).
  const child = spawn(binary, [configFile], {
    cwd: dataDir,
    stdio: ["ignore", "ignore", "pipe"],
    detached: true,
  });
  let exited: Error | undefined;
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-2_000)));
  child.on("error", (error) => (exited = new Error(`could not run ${binary}: ${error.message}`)));
  const exitedPromise = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.once("exit", (code, signal) => {
    exited ??= new Error(
      `redis-server exited during start-up (code ${code}, signal ${signal}). ${stderr.trim()} ` +
        `See ${path.join(dataDir, "redis.log")}.`,
    );
  });
  // Last resort if the parent dies without running stop(): never leave an orphaned server behind.
  const killOnExit = () => child.kill("SIGTERM");
  process.once("exit", killOnExit);

  const url = `redis://:${encodeURIComponent(options.password)}@127.0.0.1:${port}`;
  try {
    await retryUntil(
      "embedded Redis",
      async () => {
        const client = new Redis(url, {
          lazyConnect: true,
          maxRetriesPerRequest: 0,
          retryStrategy: () => null,
        });
        client.on("error", () => undefined);
        try {
          await client.connect();
          await client.ping();
        } finally {
          client.disconnect();
        }
      },
      { isFatal: () => exited },
    );
  } catch (error) {
    child.kill("SIGKILL");
    throw error;
  }
  options.log(`embedded Redis ready on 127.0.0.1:${port} (data: ${dataDir})`);

  let stopping: Promise<void> | undefined;
  return {
    url,
    stop() {
      stopping ??= (async () => {
        process.off("exit", killOnExit);
        if (child.exitCode === null && child.signalCode === null) {
          child.kill("SIGTERM"); // redis-server flushes its AOF and exits on SIGTERM
          await exitedPromise;
        }
      })();
      return stopping;
    },
  };
}

/**
 * Deletes every key of `prefix` and of the prefixes derived from it (`<prefix>-<test>`): cleans a throwaway
 * prefix after tests or benches. Through Berth's own connection factory, so REDIS_URL may name a Cluster
 * (each master scanned; keys there carry the prefix as a hash tag, `{<prefix>...}`) or a Sentinel's master.
 */
export async function deleteRedisKeys(url: string, prefix: string): Promise<void> {
  const redis = createRedisConnection({ url, prefix }, "producer", "berth-cleanup");
  try {
    // A Cluster learns its nodes when it connects: before that, nodes() is empty.
    await redis.ping();
    const cluster = redis.isCluster ? (redis as unknown as Cluster) : undefined;
    // A cluster config wraps the prefix, `{berth_test_x}`, and a derived one, `{berth_test_x-y}`.
    const pattern = cluster ? `{${prefix}*` : `${prefix}*`;
    for (const node of cluster ? cluster.nodes("master") : [redis]) {
      let cursor = "0";
      do {
        const [next, keys] = await node.scan(cursor, "MATCH", pattern, "COUNT", 1000);
        // One UNLINK per key on a cluster: keys of different prefixes hash to different slots.
        if (keys.length)
          await (cluster ? Promise.all(keys.map((key) => redis.unlink(key))) : redis.unlink(...keys));
        cursor = next;
      } while (cursor !== "0");
    }
  } finally {
    redis.disconnect();
  }
}
