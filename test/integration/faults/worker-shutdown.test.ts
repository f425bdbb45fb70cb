/**
 * The standalone worker process (workers/main.ts) under Redis faults, on a redis-server of this test's own:
 * told to stop while Redis is down (or just back) it exits within seconds and frees its health port; a
 * health-port clash fails the process before it takes a single job.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createServer } from "node:net";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { findFreePort } from "@/scripts/services/ports";
import { jobCatalog } from "@/server/queue/catalog";
import { aliveWorkers } from "@/server/queue/heartbeat";
import { createQueues } from "@/server/queue/queues";
import { createRedisConnection } from "@/server/redis";
import { startOwnRedis, type OwnRedis } from "../../fixtures/faults/redis-server";
import { bundled } from "../multiprocess/processes";
import { testLog } from "../queue/queue-fixtures";

const repoRoot = path.resolve(import.meta.dirname, "..", "..", "..");
/**
 * Under main.ts' own 20 s deadline (which exits 1 "unclean", what the unfixed worker did): a stop without jobs
 * closes at once, and one with a job in flight (a flush tick the lost Redis left running) waits at most the
 * pool's 15 s bound, plus what the process needs to close its connections on a loaded machine (seen at
 * 15.3 s and 17.8 s). The exit code 0 checked first is what tells a clean stop from the deadline's exit 1.
 */
const STOPS_WITHIN_MS = 19_500;

type WorkerProcess = {
  child: ChildProcessWithoutNullStreams;
  output: () => string;
  exited: Promise<number | null>;
};

/** workers/main.ts, bundled as the multi-process tests' children are (under tsx a start costs twice the CPU). */
function startWorkerProcess(env: Record<string, string>): WorkerProcess {
  const child = spawn(process.execPath, [bundled(path.join("..", "..", "..", "workers", "main.ts"))], {
    cwd: repoRoot,
    env: { ...process.env, LOG_LEVEL: "info", ...env },
  });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return { child, output: () => output, exited };
}

async function portIsFree(port: number): Promise<boolean> {
  const server = createServer();
  return new Promise((resolve) => {
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

describe("workers/main.ts under Redis faults", { timeout: 120_000 }, () => {
  let own: OwnRedis;
  beforeAll(async () => {
    own = await startOwnRedis();
  });
  afterAll(async () => {
    await own.stop();
  });

  it.each([
    { when: "while Redis is down", fault: () => own.kill(), heal: () => own.start() },
    { when: "right after Redis came back empty", fault: () => own.restart(), heal: async () => {} },
  ])("SIGTERM $when: stops within seconds, exit 0, port free", async ({ fault, heal }) => {
    const prefix = `faults-${randomBytes(3).toString("hex")}`;
    const port = await findFreePort();
    const worker = startWorkerProcess({
      REDIS_URL: own.url,
      BERTH_REDIS_PREFIX: prefix,
      WORKERS_HEALTH_PORT: String(port),
    });
    try {
      await vi.waitFor(
        async () => {
          if (worker.child.exitCode !== null) throw new Error(`worker exited early:\n${worker.output()}`);
          expect((await fetch(`http://127.0.0.1:${port}/ready`)).status).toBe(200);
        },
        { timeout: 60_000, interval: 200 },
      );
      await fault();
      const signalledAt = Date.now();
      worker.child.kill("SIGTERM");
      const code = await Promise.race([
        worker.exited,
        new Promise<"still running">((resolve) => setTimeout(() => resolve("still running"), 30_000)),
      ]);
      const tookMs = Date.now() - signalledAt;
      expect(code, worker.output().slice(-3000)).toBe(0);
      expect(tookMs).toBeLessThan(STOPS_WITHIN_MS);
      expect(await portIsFree(port)).toBe(true);
      expect(worker.output()).toMatch(/"msg":"stopped"/);
    } finally {
      if (worker.child.exitCode === null) worker.child.kill("SIGKILL");
      await heal();
    }
  });

  it("a health port in use fails the process before it takes a job", async () => {
    const prefix = `faults-${randomBytes(3).toString("hex")}`;
    const redis = { url: own.url, prefix };
    const connection = createRedisConnection(redis, "producer", "test-port-clash");
    const queues = createQueues(jobCatalog, { connection, redis, log: testLog });
    // The previous worker, still holding the port.
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", () => resolve()));
    const address = holder.address();
    const port = typeof address === "object" && address ? address.port : 0;
    try {
      const job = await queues.get("audit").add("audit.flush", { trigger: "manual" });
      const worker = startWorkerProcess({
        REDIS_URL: own.url,
        BERTH_REDIS_PREFIX: prefix,
        WORKERS_HEALTH_PORT: String(port),
      });
      const code = await worker.exited;
      expect(code).not.toBe(0);
      expect(worker.output()).toMatch(/EADDRINUSE/);
      expect(await job.getState()).toBe("waiting");
      expect(await aliveWorkers(connection, prefix, 60_000)).toEqual([]);
      expect(await queues.get("audit").getJobSchedulers()).toEqual([]);
    } finally {
      await new Promise<void>((resolve) => holder.close(() => resolve()));
      await queues.close();
      await connection.quit();
    }
  });
});
