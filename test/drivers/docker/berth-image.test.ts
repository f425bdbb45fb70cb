import { execFile, spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { dropDatabase, ensureDatabase } from "@/scripts/services/database";
import { findRedisServer } from "@/scripts/services/redis";
import { describeDocker } from "./support/docker-env";

const run = promisify(execFile);
const repoRoot = path.resolve(import.meta.dirname, "..", "..", "..");
const BUILD_SCRIPT = path.join(repoRoot, "deploy", "docker", "build-image.sh");
const LOCAL_BASE = "berth-node:bookworm";
// The whole build is minutes: only on request (see below), never in CI's budget.
const describeFullBuild = process.env.BERTH_TEST_BERTH_IMAGE === "1" ? describe : describe.skip;
const docker = (...args: string[]) => run("docker", args, { maxBuffer: 16 * 1024 * 1024 });

/**
 * The image recipe of deploy/docker (issue 14). Always: the local Node 20 base (berth-base:bookworm plus
 * this machine's node and npm, seconds) runs Node 20 on bookworm's glibc in a network-none container.
 * The whole `berth:latest` build (npm ci --omit=dev, a context of about 1 GB: minutes) runs only with
 * BERTH_TEST_BERTH_IMAGE=1, outside CI's budget: then the image's own `npm start` (API only) and `npm run
 * workers` serve, in a network-none container, over PostgreSQL's unix socket and a Redis socket of the test's.
 */
describeDocker("deploy/docker: the berth image", () => {
  it("the local base runs this machine's Node 20 on bookworm, with npm, in a network-none container", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "berth-local-base-"));
    try {
      // The same two files build-image.sh --local-base puts in the context.
      const npmDir = path.dirname(
        path.dirname((await run("readlink", ["-f", "/usr/bin/npm"])).stdout.trim()),
      );
      await run("cp", [process.execPath, path.join(dir, "node")]);
      await run("cp", ["-a", npmDir, path.join(dir, "npm")]);
      const dockerfile = path.join(repoRoot, "deploy", "docker", "local-base.Dockerfile");
      await docker("build", "--network", "none", "-q", "-t", LOCAL_BASE, "-f", dockerfile, dir);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    const { stdout } = await docker(
      "run",
      "--rm",
      "--network",
      "none",
      "--user",
      "1000:1000",
      LOCAL_BASE,
      "sh",
      "-c",
      "node --version && npm --version && node -p \"require('os').userInfo().uid\"",
    );
    const [node, npm, uid] = stdout.trim().split("\n");
    expect(node).toBe(process.version);
    expect(node).toMatch(/^v20\./);
    expect(npm).toMatch(/^\d+\.\d+\.\d+$/);
    expect(uid).toBe("1000");
  });

  describeFullBuild("berth:latest built from it (BERTH_TEST_BERTH_IMAGE=1)", () => {
    const tag = `berth:test-${randomBytes(3).toString("hex")}`;
    const container = `berth-image-${randomBytes(3).toString("hex")}`;
    const databaseUrl = `postgresql://root@localhost/berth_image_${randomBytes(3).toString("hex")}?host=/var/run/postgresql`;
    let socketDir: string;
    let redis: ChildProcess | undefined;

    beforeAll(async () => {
      await run("bash", [BUILD_SCRIPT, "--local-base", "--tag", tag], { maxBuffer: 64 * 1024 * 1024 });
      socketDir = await mkdtemp(path.join(tmpdir(), "berth-image-redis-"));
      // The image runs as uid 1000: it must pass through the folder (mkdtemp makes it 0700) to the socket.
      await chmod(socketDir, 0o755);
      const redisServer = await findRedisServer();
      if (!redisServer) throw new Error("redis-server is needed on PATH");
      redis = spawn(redisServer, [
        ...["--port", "0", "--unixsocket", path.join(socketDir, "redis.sock"), "--unixsocketperm", "777"],
        ...["--save", "", "--appendonly", "no", "--dir", socketDir],
      ]);
      await ensureDatabase(databaseUrl);
    }, 1_800_000);
    afterAll(async () => {
      await docker("rm", "-f", container).catch(() => undefined);
      await docker("rmi", "-f", tag).catch(() => undefined);
      redis?.kill("SIGKILL");
      await dropDatabase(databaseUrl).catch(() => undefined);
      if (socketDir) await rm(socketDir, { recursive: true, force: true });
    });

    /** GET /api/health from inside the container (loopback: the container has no other network). */
    async function health(): Promise<{ status: number; body: { checks: Record<string, { ok: boolean }> } }> {
      const script =
        "fetch('http://127.0.0.1:3000/api/health').then(async (r) => console.log(JSON.stringify({ status: r.status, body: await r.json() })))";
      const { stdout } = await docker("exec", container, "node", "-e", script);
      return JSON.parse(stdout) as Awaited<ReturnType<typeof health>>;
    }

    it("npm start (API only) serves its health route; npm run workers in the same image makes it ok", async () => {
      await docker(
        ...["run", "-d", "--name", container, "--network", "none"],
        ...["-v", "/var/run/postgresql:/var/run/postgresql", "-v", `${socketDir}:/run/berth-redis`],
        ...["-e", `DATABASE_URL=${databaseUrl}`, "-e", "REDIS_URL=redis://127.0.0.1:6379"],
        ...["-e", `BERTH_REDIS_PREFIX=berth-image-${randomBytes(3).toString("hex")}`],
        ...["-e", `BERTH_AUTH_SECRET=${randomBytes(32).toString("base64url")}`],
        ...["-e", `BERTH_ENCRYPTION_KEY=${randomBytes(32).toString("base64")}`],
        ...["-e", "BERTH_API_ONLY=true", "-e", "BERTH_WORKSPACE_BACKEND=host-unconfined"],
        tag,
      );
      // The container has loopback only: a relay inside it carries 127.0.0.1:6379 to the test's Redis socket.
      // A failed connection ends that client's, never the relay.
      const relay =
        "const net = require('net'); net.createServer((c) => { const r = net.connect('/run/berth-redis/redis.sock'); r.on('error', (e) => { console.error(e.message); c.destroy(); }); c.on('error', () => r.destroy()); c.pipe(r).pipe(c); }).listen(6379, '127.0.0.1')";
      await docker("exec", "-d", container, "node", "-e", relay);
      const logs = async () => (await docker("logs", container)).stdout;
      await vi.waitFor(
        async () => {
          const answer = await health().catch(async (error: Error) => {
            throw new Error(`${error.message}\n${await logs()}`);
          });
          expect(answer.body.checks).toMatchObject({ database: { ok: true }, redis: { ok: true } });
          expect(answer).toMatchObject({ status: 503, body: { checks: { workers: { ok: false } } } });
        },
        { timeout: 300_000, interval: 1_000 },
      );
      expect(await logs()).toContain("API only (BERTH_API_ONLY)");

      await docker("exec", "-d", "-e", "WORKERS_HEALTH_PORT=3001", container, "npm", "run", "workers");
      await vi.waitFor(async () => expect((await health()).status).toBe(200), {
        timeout: 120_000,
        interval: 1_000,
      });
    }, 600_000);
  });
});
