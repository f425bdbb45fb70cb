/**
 * A PostgreSQL outage while a provision job runs, in a real worker process whose database connection goes
 * through a loopback TCP proxy (cut and refused; the machine's PostgreSQL is never stopped): the job's
 * retries must outlast a short outage, so the workspace ends READY instead of out of attempts and stuck.
 */
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { Job } from "bullmq";
import { getWorkspace, upsertWorkspaceBinding } from "@/server/modules/workspace/workspace.data";
import { jobCatalog } from "@/server/queue/catalog";
import { createEnqueue } from "@/server/queue/enqueue";
import { createQueues } from "@/server/queue/queues";
import { createRedisConnection } from "@/server/redis";
import {
  databaseServerOf,
  databaseUrlThrough,
  startTcpProxy,
  type TcpProxy,
} from "../../fixtures/faults/tcp-proxy";
import { createTestTenant, type TestTenant } from "../db/fixtures";
import { makeControlDir, startChild, stopChildren, type Child } from "../multiprocess/processes";
import { isolatedRedisConfig, redisPrefixEnv, testLog } from "../queue/queue-fixtures";
import { freshSession } from "../workspace/harness";
import { processBerth } from "@/server/composition/process-berth";

/** The attempts the outage lasts for: with five attempts from 0.5 s, the job was out of them by now. */
const FAILED_ATTEMPTS_DURING_OUTAGE = 5;

describe("a PostgreSQL outage during a provision", { timeout: 150_000 }, () => {
  let tenant: TestTenant;
  let proxy: TcpProxy | undefined;
  let children: Child[] = [];

  beforeAll(async () => {
    tenant = await createTestTenant();
  });
  afterEach(async (context) => {
    await stopChildren(children, context.task.result?.state === "fail");
    children = [];
    await proxy?.close();
  });

  it("the provision job's retries outlast the outage: the workspace ends READY", async () => {
    // The record exists (PENDING) before the outage, as a first use leaves it.
    const { agent, workspaceId } = await freshSession(tenant.scope);
    await upsertWorkspaceBinding(
      tenant.scope,
      {
        id: workspaceId,
        backendKind: "local",
        isolationPolicy: "PER_AGENT",
        agentId: agent.id,
      },
      { config: processBerth().config.quotas },
      processBerth().db,
    );
    expect((await getWorkspace(tenant.scope, workspaceId, processBerth().db)).state).toBe("PENDING");

    proxy = await startTcpProxy(databaseServerOf(process.env.DATABASE_URL!));
    const basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-pg-outage-")));
    await fs.chmod(basedir, 0o711);
    const redis = isolatedRedisConfig();
    const worker = startChild("worker-process.ts", {
      DATABASE_URL: databaseUrlThrough(proxy, process.env.DATABASE_URL!),
      BERTH_REDIS_PREFIX: redisPrefixEnv(redis),
      BERTH_WORKSPACE_BASEDIR: path.join(basedir, "workspaces"),
      MP_CONTROL_DIR: await makeControlDir(basedir),
      LOG_LEVEL: "silent",
    });
    children.push(worker);
    await worker.nextLine((l) => l === "ready");

    const connection = createRedisConnection(redis, "producer", "test-pg-outage");
    const queues = createQueues(jobCatalog, { connection, redis, log: testLog });
    try {
      proxy.outage();
      const job: Job = await createEnqueue(queues)("workspace.provision", {
        tenantId: tenant.tenantId,
        workspaceId,
        reason: `outage test ${randomBytes(2).toString("hex")}`,
      });
      // The outage lasts until the job has failed this many attempts on it.
      await vi.waitFor(
        async () => {
          const current = await queues.get("workspace").getJob(job.id!);
          expect(current?.attemptsMade ?? 0).toBeGreaterThanOrEqual(FAILED_ATTEMPTS_DURING_OUTAGE);
        },
        { timeout: 60_000, interval: 100 },
      );
      proxy.restore();

      await vi.waitFor(
        async () => {
          expect((await getWorkspace(tenant.scope, workspaceId, processBerth().db)).state).toBe("READY");
          // The job completes when its processor has returned, a moment after it wrote READY.
          expect(await (await queues.get("workspace").getJob(job.id!))?.getState()).toBe("completed");
        },
        { timeout: 60_000, interval: 250 },
      );
    } finally {
      await queues.close();
      await connection.quit();
      await fs.rm(basedir, { recursive: true, force: true });
    }
  });
});
