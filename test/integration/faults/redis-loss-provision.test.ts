/**
 * Redis loses its data (a restart without persistence, a failover) while an API process waits for a
 * provision, with real API and worker processes on a redis-server of this test's own: the waiter must notice
 * from the record and the job's existence, and answer within seconds instead of after its whole wait.
 */
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { jobCatalog } from "@/server/queue/catalog";
import { createQueues } from "@/server/queue/queues";
import { deterministicJobId } from "@/server/queue/types";
import { createRedisConnection } from "@/server/redis";
import { getWorkspace } from "@/server/modules/workspace/workspace.data";
import { startOwnRedis, type OwnRedis } from "../../fixtures/faults/redis-server";
import { createTestTenant, type TestTenant } from "../db/fixtures";
import {
  makeControlDir,
  readProvisionLog,
  startChild,
  stopChildren,
  type Child,
} from "../multiprocess/processes";
import { testLog } from "../queue/queue-fixtures";
import { freshSession } from "../workspace/harness";
import { processBerth } from "@/server/composition/process-berth";

// Long enough that waiting it out is unmistakable: the fixed gate answers well within a tenth of it.
const PROVISION_WAIT_MS = 90_000;
const ANSWER_WITHIN_MS = 30_000;

describe("Redis loses its data while an API waits for a provision", { timeout: 180_000 }, () => {
  let tenant: TestTenant;
  let redis: OwnRedis;
  let children: Child[] = [];

  beforeAll(async () => {
    tenant = await createTestTenant();
    redis = await startOwnRedis();
  });
  afterEach(async (context) => {
    await stopChildren(children, context.task.result?.state === "fail");
    children = [];
  });
  afterAll(async () => {
    await redis.stop();
  });

  async function setup() {
    const basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-redis-loss-")));
    await fs.chmod(basedir, 0o711);
    const controlDir = await makeControlDir(basedir);
    const prefix = `faults-${randomBytes(3).toString("hex")}`;
    const env = {
      REDIS_URL: redis.url,
      BERTH_REDIS_PREFIX: prefix,
      BERTH_WORKSPACE_BASEDIR: path.join(basedir, "workspaces"),
      BERTH_WORKSPACE_PROVISION_WAIT_MS: String(PROVISION_WAIT_MS),
      MP_CONTROL_DIR: controlDir,
      WORKERS_STALLED_INTERVAL_MS: "1000",
      WORKERS_LOCK_DURATION_MS: "3000",
      LOG_LEVEL: "silent",
    };
    return { basedir, controlDir, env, prefix };
  }

  /** Resolves once the provision job of `workspaceId` is back in Redis and a worker runs it. */
  async function untilJobActive(prefix: string, workspaceId: string): Promise<void> {
    const connection = createRedisConnection({ url: redis.url, prefix }, "producer", "test-redis-loss");
    const queues = createQueues(jobCatalog, { connection, redis: { url: redis.url, prefix }, log: testLog });
    try {
      const jobId = deterministicJobId("workspace.provision", workspaceId);
      await vi.waitFor(
        async () => expect(await (await queues.get("workspace").getJob(jobId))?.getState()).toBe("active"),
        { timeout: 30_000, interval: 200 },
      );
    } finally {
      await queues.close();
      await connection.quit();
    }
  }

  function start(script: string, env: Record<string, string>): Child {
    const child = startChild(script, env);
    children.push(child);
    return child;
  }

  function startApi(env: Record<string, string>, sessionId: string): Child {
    return start("api-process.ts", {
      ...env,
      MP_TENANT_ID: tenant.tenantId,
      MP_USER_ID: tenant.owner.id,
      MP_SESSION_ID: sessionId,
      MP_CALLS: "5",
    });
  }

  it.each([
    { loss: "FLUSHALL (a failover to an empty replica)", lose: () => redis.flushAll() },
    { loss: "a restart without persistence", lose: () => redis.restart() },
  ])(
    "the worker finished after the job vanished ($loss): the waiting API answers READY within seconds",
    async ({ lose }) => {
      const { basedir, controlDir, env, prefix } = await setup();
      await fs.writeFile(path.join(controlDir, "block"), "");
      const { session, workspaceId } = await freshSession(tenant.scope);
      const worker = start("worker-process.ts", env);
      await worker.nextLine((l) => l === "ready");
      const api = startApi(env, session.id);
      await api.nextLine((l) => l === "ready");
      api.process.stdin.write("go\n");

      // The provision is under way (and held) in the worker: Redis loses everything, then the worker finishes.
      await vi.waitFor(
        async () =>
          expect((await readProvisionLog(controlDir)).some((l) => l.startsWith("start"))).toBe(true),
        { timeout: 30_000 },
      );
      await lose();
      // The hardest interleaving, not left to timing: the waiting API finds the job gone and enqueues it
      // again, and the worker takes that new job while its first run still holds the machine's creation.
      await untilJobActive(prefix, workspaceId);
      const releasedAt = Date.now();
      await fs.writeFile(path.join(controlDir, "release"), "");

      const result = JSON.parse(await api.nextLine((l) => l.startsWith("{"))) as unknown;
      expect(Date.now() - releasedAt).toBeLessThan(ANSWER_WITHIN_MS);
      expect(result).toEqual({ ok: 5, workspaceIds: [workspaceId], errors: [] });
      expect((await getWorkspace(tenant.scope, workspaceId, processBerth().db)).state).toBe("READY");
      // Exactly once: the second job found the first run's claim and never created the machine itself.
      const log = await readProvisionLog(controlDir);
      expect(log.filter((l) => l.startsWith("start"))).toHaveLength(1);
      expect(log.filter((l) => l.startsWith("done"))).toHaveLength(1);
      await fs.rm(basedir, { recursive: true, force: true });
    },
  );

  it("the job vanished before any worker took it: it is enqueued again and the first use does not stay PENDING", async () => {
    const { basedir, controlDir, env, prefix } = await setup();
    const { session, workspaceId } = await freshSession(tenant.scope);
    const api = startApi(env, session.id);
    await api.nextLine((l) => l === "ready");
    api.process.stdin.write("go\n");

    // No worker yet: the job waits in Redis; then Redis loses it, and only then does a worker come up.
    const connection = createRedisConnection({ url: redis.url, prefix }, "producer", "test-redis-loss");
    const queues = createQueues(jobCatalog, { connection, redis: { url: redis.url, prefix }, log: testLog });
    try {
      const jobId = deterministicJobId("workspace.provision", workspaceId);
      // The job is in Redis and the API is waiting on the queue's events (its QueueEvents connection is up).
      await vi.waitFor(
        async () => {
          expect(await queues.get("workspace").getJob(jobId)).toBeTruthy();
          expect(String(await connection.call("CLIENT", "LIST"))).toContain("name=berth-events-workspace");
        },
        { timeout: 30_000 },
      );
      await redis.flushAll();
      const lostAt = Date.now();
      const worker = start("worker-process.ts", env);
      await worker.nextLine((l) => l === "ready");

      const result = JSON.parse(await api.nextLine((l) => l.startsWith("{"))) as unknown;
      expect(Date.now() - lostAt).toBeLessThan(ANSWER_WITHIN_MS);
      expect(result).toEqual({ ok: 5, workspaceIds: [workspaceId], errors: [] });
      expect((await getWorkspace(tenant.scope, workspaceId, processBerth().db)).state).toBe("READY");
      expect((await readProvisionLog(controlDir)).filter((l) => l.startsWith("start"))).toHaveLength(1);
    } finally {
      await queues.close();
      await connection.quit();
    }
    await fs.rm(basedir, { recursive: true, force: true });
  });
});
