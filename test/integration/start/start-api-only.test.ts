import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { findFreePort } from "@/scripts/services/ports";
import { loadRedisConfig } from "@/server/config/redis";
import { getDb } from "@/server/db";
import { jobCatalog } from "@/server/queue/catalog";
import { createQueues, type QueueSet } from "@/server/queue/queues";
import { createRedisConnection } from "@/server/redis";
import type { BerthJobCatalog } from "@/server/queue/catalog";
import type { Redis } from "ioredis";
import { createTestTenant, type TestTenant } from "../db/fixtures";
import { testLog } from "../queue/queue-fixtures";
import { startBerthProcess, waitUntilServing, type StartedBerth } from "./support/start-process";

const repoRoot = path.resolve(import.meta.dirname, "..", "..", "..");

/** `npm run workers` as its own process group (npm → node), stopped with SIGTERM to the group. */
function startWorkers(env: NodeJS.ProcessEnv) {
  const child = spawn("npm", ["run", "workers", "--silent"], {
    cwd: repoRoot,
    env,
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  const lines: string[] = [];
  createInterface({ input: child.stdout }).on("line", (line) => lines.push(line));
  createInterface({ input: child.stderr }).on("line", (line) => lines.push(line));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return {
    lines,
    stop: () => {
      if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, "SIGTERM");
      return exited;
    },
  };
}

/**
 * BERTH_API_ONLY=true: the real `npm start` serves the API and dashboard with no worker of its own. A job the
 * API enqueues (the audit flush after a failed sign-in) waits, with no BullMQ worker registered on any queue,
 * and health reports no live worker; a separate `npm run workers` then takes it and health turns ok.
 */
describe("npm start with BERTH_API_ONLY=true, beside npm run workers", () => {
  const prefix = `${process.env.BERTH_REDIS_PREFIX}-apionly-${randomBytes(3).toString("hex")}`;
  let dataDir: string;
  let base: string;
  let env: NodeJS.ProcessEnv;
  let api: StartedBerth;
  let tenant: TestTenant;
  let connection: Redis;
  let queues: QueueSet<BerthJobCatalog>;

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "berth-api-only-"));
    const port = await findFreePort();
    base = `http://127.0.0.1:${port}`;
    tenant = await createTestTenant();
    env = {
      ...process.env,
      BERTH_DATA_DIR: dataDir,
      BERTH_REDIS_PREFIX: prefix,
      BERTH_API_ONLY: "true",
      LOG_LEVEL: "warn",
      WORKERS_HEALTH_PORT: String(await findFreePort()),
    };
    const redis = loadRedisConfig({ REDIS_URL: process.env.REDIS_URL, BERTH_REDIS_PREFIX: prefix });
    connection = createRedisConnection(redis, "producer", "test-api-only");
    queues = createQueues(jobCatalog, { connection, redis, log: testLog });
    api = startBerthProcess({ via: "npm", port, env });
    await waitUntilServing(api, base);
  }, 900_000);

  afterAll(async () => {
    await api?.stop();
    await queues?.close();
    await connection?.quit();
    await rm(dataDir, { recursive: true, force: true });
  });

  it("serves without workers; its jobs wait; npm run workers takes them and health turns ok", async () => {
    expect(api.lines.join("\n")).toContain("API only (BERTH_API_ONLY)");
    const unhealthy = await fetch(`${base}/api/health`);
    expect(unhealthy.status).toBe(503);
    expect(await unhealthy.json()).toMatchObject({
      checks: { database: { ok: true }, redis: { ok: true }, workers: { ok: false, alive: 0 } },
    });

    const signIn = await fetch(`${base}/api/auth/sign-in/email`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: base },
      body: JSON.stringify({ email: tenant.owner.email, password: "not-the-password" }),
    });
    expect(signIn.status).toBe(401);
    // The API process audited the failure and enqueued the flush; nobody in it consumes the queue.
    const audit = queues.get("audit");
    const [flush] = await audit.getJobs(["waiting", "prioritized", "delayed"]);
    expect(flush?.name).toBe("audit.flush");
    for (const queue of queues.all()) expect(await queue.getWorkersCount()).toBe(0);
    expect(await audit.getJobState(flush!.id!)).toMatch(/waiting|prioritized|delayed/);

    const workers = startWorkers(env);
    try {
      await vi.waitFor(async () => expect(await audit.getJobState(flush!.id!)).toBe("completed"), {
        timeout: 120_000,
        interval: 200,
      });
      const written = await getDb().auditLog.findFirst({
        where: { tenantId: tenant.tenantId, action: "auth.sign-in", outcome: "failure" },
      });
      expect(written).not.toBeNull();
      await vi.waitFor(
        async () => {
          const health = await fetch(`${base}/api/health`);
          expect(await health.json()).toMatchObject({ status: "ok", checks: { workers: { alive: 1 } } });
        },
        { timeout: 60_000, interval: 250 },
      );
    } finally {
      expect(await workers.stop()).toBe(0);
    }
  });
});
