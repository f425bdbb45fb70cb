import { randomBytes } from "node:crypto";
import { chmod, mkdir, mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { connect } from "node:net";
import { Redis } from "ioredis";
import pg from "pg";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startEmbeddedPostgres } from "@/scripts/services/postgres";
import { findRedisServer, RedisServerNotFoundError, startEmbeddedRedis } from "@/scripts/services/redis";
import { loadOrCreateLocalSecrets } from "@/scripts/services/secrets";

describe("embedded services (the real binaries, in a throw-away folder)", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "berth-services-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("starts redis-server from PATH on a free port behind a password, with AOF data in its folder, and stops it", async () => {
    const password = randomBytes(12).toString("hex");
    const redis = await startEmbeddedRedis({
      dataDir: path.join(dir, "redis"),
      password,
      log: () => undefined,
    });
    const url = new URL(redis.url);
    expect(url.hostname).toBe("127.0.0.1");
    expect(Number(url.port)).not.toBe(6379);

    const client = new Redis(redis.url);
    await client.set("k", "v");
    expect(await client.get("k")).toBe("v");
    client.disconnect();

    // Without the password: a raw RESP command gets NOAUTH (ioredis itself would fail earlier, at HELLO).
    expect(await rawRedisCommand(Number(url.port), "GET k")).toMatch(/^-NOAUTH/);

    const config = await readFile(path.join(dir, "redis", "redis.conf"), "utf8");
    expect(config).toContain("appendonly yes");
    expect((await stat(path.join(dir, "redis", "redis.conf"))).mode & 0o777).toBe(0o600);

    await redis.stop();
    const after = new Redis(redis.url, {
      lazyConnect: true,
      retryStrategy: () => null,
      maxRetriesPerRequest: 0,
    });
    after.on("error", () => undefined);
    await expect(after.connect()).rejects.toThrow(/ECONNREFUSED|Connection is closed/);
    after.disconnect();
  });

  it("stops with a clear message when redis-server is not on PATH", async () => {
    expect(await findRedisServer("")).toBeUndefined();
    const attempt = startEmbeddedRedis({ dataDir: dir, password: "x", log: () => undefined, envPath: dir });
    await expect(attempt).rejects.toBeInstanceOf(RedisServerNotFoundError);
    await expect(attempt).rejects.toThrow(/apt-get install redis-server[\s\S]*REDIS_URL=/);
  });

  it("initialises and starts the embedded PostgreSQL on a free port with a password, and deletes throw-away data on stop", async () => {
    const password = randomBytes(12).toString("hex");
    const dataDir = path.join(dir, "postgres");
    const server = await startEmbeddedPostgres({
      dataDir,
      password,
      persistent: false,
      log: () => undefined,
    });
    expect(Number(new URL(server.adminUrl).port)).not.toBe(5432);

    const client = new pg.Client({ connectionString: server.adminUrl });
    await client.connect();
    const { rows } = await client.query<{ version: string }>("SELECT version()");
    expect(rows[0]?.version).toMatch(/^PostgreSQL 1\d/);
    await client.end();

    const wrong = new pg.Client({ connectionString: server.adminUrl.replace(password, "wrong") });
    await expect(wrong.connect()).rejects.toThrow(/password authentication failed/);

    await server.stop();
    await expect(stat(dataDir)).rejects.toMatchObject({ code: "ENOENT" });
  });

  // PostgreSQL runs as the `postgres` user when we are root (as on CI machines): a 0700 parent folder
  // (a home directory, typically) would make its spawn fail with EACCES.
  it.runIf(process.getuid?.() === 0)(
    "as root, makes a parent folder the postgres user cannot traverse traversable (o+x) and says so",
    async () => {
      const locked = path.join(dir, "home-like");
      await mkdir(locked, { mode: 0o700 });
      await chmod(locked, 0o700);
      const logs: string[] = [];
      const server = await startEmbeddedPostgres({
        dataDir: path.join(locked, "postgres"),
        password: "pw-123456",
        persistent: false,
        log: (line) => logs.push(line),
      });
      await server.stop();
      expect((await stat(locked)).mode & 0o777).toBe(0o701);
      expect(logs.join("\n")).toContain(`made ${locked} traversable (o+x)`);
    },
  );

  it("generates local secrets once into a 0600 file and keeps them across calls", async () => {
    const first = await loadOrCreateLocalSecrets(dir);
    const second = await loadOrCreateLocalSecrets(dir);
    expect(second).toEqual(first);
    expect(Buffer.from(first.encryptionKey, "base64")).toHaveLength(32);
    expect(first.authSecret.length).toBeGreaterThanOrEqual(32);
    expect((await stat(path.join(dir, "secrets.json"))).mode & 0o777).toBe(0o600);
  });
});

function rawRedisCommand(port: number, command: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => socket.write(`${command}\r\n`));
    socket.once("data", (data) => {
      socket.destroy();
      resolve(data.toString());
    });
    socket.once("error", reject);
  });
}
