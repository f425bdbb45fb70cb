import { randomBytes } from "node:crypto";
import { Queue } from "bullmq";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, expect, it, vi } from "vitest";
import { loadRedisConfig, type RedisConfig } from "@/server/config/redis";
import { getDb } from "@/server/db";
import { RedisCancelBus } from "@/server/modules/chat/redis-cancel-bus";
import { getWorkspace } from "@/server/modules/workspace/workspace.data";
import { pendingAuditEntries, recordAudit } from "@/server/modules/audit/audit-buffer.service";
import {
  admitHeldTurn,
  admitProvisionInWindow,
  countHeldTurns,
  withQuotaLock,
} from "@/server/modules/quota/quota-counters";
import { jobCatalog, type BerthJobCatalog } from "@/server/queue/catalog";
import { createEnqueue } from "@/server/queue/enqueue";
import { aliveWorkers, beat } from "@/server/queue/heartbeat";
import { bullPrefix, createQueues, type QueueSet } from "@/server/queue/queues";
import { createRedisConnection } from "@/server/redis";
import { deleteRedisKeys } from "@/scripts/services/redis";
import { claimBatch } from "@/server/shared/claimed-batches";
import { startWorkerRuntime, type WorkerRuntime } from "@/workers/runtime";
import {
  describeWithRedisServer,
  startRedisCluster,
  startRedisSentinel,
  type RedisTopologyFixture,
} from "../../fixtures/redis-cluster/redis-topologies";
import { createTestTenant, type TestTenant } from "../db/fixtures";
import { freshSession, startWorkspaceHarness } from "../workspace/harness";
import { testLog } from "./queue-fixtures";

/** Berth's config for a topology URL, under a prefix of this run's own. */
function configFor(url: string): RedisConfig {
  return loadRedisConfig({
    REDIS_URL: url,
    BERTH_REDIS_PREFIX: `berth-topo-${randomBytes(3).toString("hex")}`,
  });
}

/**
 * Berth end to end on a topology: an audit entry recorded through the API side's buffer is flushed by an
 * audit.flush job that a real worker runtime takes from the queue, claims with the buffer's Lua script and
 * writes to Postgres; the runtime's heartbeat (a MULTI) is visible.
 */
async function auditThroughWorkers(redis: RedisConfig, tenant: TestTenant): Promise<void> {
  const connection = createRedisConnection(redis, "producer", "test-topology");
  const queues: QueueSet<BerthJobCatalog> = createQueues(jobCatalog, { connection, redis, log: testLog });
  let runtime: WorkerRuntime | undefined;
  try {
    const events = await queues.events("audit");
    runtime = await startWorkerRuntime({
      redis,
      workers: { concurrency: 1, healthPort: 0, heartbeatTtlMs: 15_000 },
      log: testLog,
      healthPort: null,
      schedules: [],
    });
    const enqueue = createEnqueue(queues);
    let flush: Awaited<ReturnType<typeof enqueue>> | undefined;
    const action = `topology.${randomBytes(3).toString("hex")}`;
    const { id } = await recordAudit(
      tenant.scope,
      { action, outcome: "success" },
      {
        redis: connection,
        redisPrefix: redis.prefix,
        requestFlush: async () => {
          flush = await enqueue("audit.flush", { trigger: "write" }, { deduplicationId: "audit.flush" });
        },
      },
    );
    expect(await flush!.waitUntilFinished(events)).toMatchObject({ written: 1 });
    expect(await getDb().auditLog.findUnique({ where: { id } })).toMatchObject({ action });
    expect(await pendingAuditEntries(connection, redis.prefix)).toBe(0);
    expect(await aliveWorkers(connection, redis.prefix, 15_000)).toHaveLength(1);
  } finally {
    await runtime?.stop();
    await queues.close();
    await connection.quit();
  }
}

describeWithRedisServer("Berth on a Redis Cluster (three redis-server masters)", () => {
  let cluster: RedisTopologyFixture;
  let tenant: TestTenant;

  beforeAll(async () => {
    cluster = await startRedisCluster();
    tenant = await createTestTenant();
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  it("wraps the prefix as a hash tag on a cluster only (one server and Sentinel keep the plain prefix)", () => {
    expect(loadRedisConfig({ REDIS_URL: cluster.url, BERTH_REDIS_PREFIX: "acme" }).prefix).toBe("{acme}");
    expect(loadRedisConfig({ REDIS_URL: cluster.url }).prefix).toBe("{berth}");
    expect(loadRedisConfig({ REDIS_URL: "redis://127.0.0.1:6379" }).prefix).toBe("berth");
  });

  it("the plain prefix gives CROSSSLOT on a cluster; Berth's config keeps each script's keys in one slot", async () => {
    const plain: RedisConfig = { url: cluster.url, prefix: `plain-${randomBytes(3).toString("hex")}` };
    const connection = createRedisConnection(plain, "producer", "test-plain");
    const queue = new Queue("audit", { connection, prefix: bullPrefix(plain.prefix) });
    try {
      await expect(queue.add("audit.flush", { trigger: "write" })).rejects.toThrow(/CROSSSLOT/);
      const keys = { buffer: `${plain.prefix}:audit:buffer`, inflight: `${plain.prefix}:audit:inflight` };
      await expect(claimBatch(connection, keys, 10)).rejects.toThrow(/CROSSSLOT/);
      await expect(beat(connection, plain.prefix, "w1")).rejects.toThrow(/same slot|CROSSSLOT/);
    } finally {
      await queue.close();
      await connection.quit();
    }

    const berth = configFor(cluster.url);
    const tagged = createRedisConnection(berth, "producer", "test-tagged");
    const queues = createQueues(jobCatalog, { connection: tagged, redis: berth, log: testLog });
    try {
      const job = await createEnqueue(queues)("audit.flush", { trigger: "write" });
      expect(await queues.get("audit").getJobState(job.id!)).toBe("waiting");
      const keys = { buffer: `${berth.prefix}:audit:buffer`, inflight: `${berth.prefix}:audit:inflight` };
      expect(await claimBatch(tagged, keys, 10)).toEqual([]);
      await beat(tagged, berth.prefix, "w1");
      expect(await aliveWorkers(tagged, berth.prefix, 60_000)).toEqual(["w1"]);
    } finally {
      await queues.close();
      await tagged.quit();
    }
  });

  it("a job enqueued through Berth's queues is processed by the worker runtime, the audit buffer flushes", async () => {
    await auditThroughWorkers(configFor(cluster.url), tenant);
  });

  it("a cancel request reaches the subscriber and is counted (sharded pub/sub), only while it listens", async () => {
    const redis = configFor(cluster.url);
    const connections = [0, 1, 2, 3].map((n) => createRedisConnection(redis, "worker", `test-cancel-${n}`));
    const [publisherA, subscriberA, publisherB, subscriberB] = connections as [Redis, Redis, Redis, Redis];
    const runner = new RedisCancelBus({ redis: publisherA, subscriber: subscriberA, prefix: redis.prefix });
    const caller = new RedisCancelBus({ redis: publisherB, subscriber: subscriberB, prefix: redis.prefix });
    try {
      const session = randomBytes(6).toString("hex");
      expect(await caller.requestCancel(session)).toBe(false);
      let heard!: () => void;
      const cancelled = new Promise<void>((resolve) => (heard = resolve));
      const unsubscribe = await runner.onCancelRequested(session, () => heard());
      // Classic PUBLISH counts only one node's subscribers, so this would be false on two of three nodes.
      expect(await caller.requestCancel(session)).toBe(true);
      await cancelled;
      unsubscribe();
      await vi.waitFor(async () => expect(await caller.requestCancel(session)).toBe(false), {
        timeout: 10_000,
      });
    } finally {
      runner.close();
      caller.close();
      await Promise.all(connections.map((connection) => connection.quit()));
    }
  });

  it("provisions a workspace through the workspace queue and a worker runtime, exactly once", async () => {
    const h = await startWorkspaceHarness({}, { redis: configFor(cluster.url) });
    try {
      const { session, workspaceId } = await freshSession(tenant.scope);
      const resolved = await Promise.all(
        [h.service, h.replica()].map((s) => s.resolveForSession(tenant.scope, session.id)),
      );
      expect(resolved.map((r) => r.workspace.id)).toEqual([workspaceId, workspaceId]);
      expect(h.machine.provisioned.filter((id) => id === workspaceId)).toHaveLength(1);
      expect((await getWorkspace(tenant.scope, workspaceId, getDb())).state).toBe("READY");
    } finally {
      await h.close();
    }
  });

  it("the test setup's cleanup deletes a run's keys on every master, and only those", async () => {
    const run = `berth-clean-${randomBytes(3).toString("hex")}`;
    const configs = [run, `${run}-a`, `${run}-b`, `other-${run}`].map((prefix) =>
      loadRedisConfig({ REDIS_URL: cluster.url, BERTH_REDIS_PREFIX: prefix }),
    );
    const connection = createRedisConnection(configs[0]!, "producer", "test-cleanup");
    try {
      for (const { prefix } of configs) await connection.set(`${prefix}:key`, "1");
      await deleteRedisKeys(cluster.url, run);
      const left = await Promise.all(configs.map(({ prefix }) => connection.exists(`${prefix}:key`)));
      expect(left).toEqual([0, 0, 0, 1]);
    } finally {
      await connection.del(`${configs[3]!.prefix}:key`);
      await connection.quit();
    }
  });

  it("the quota scripts admit and refuse on the cluster", async () => {
    const redis = configFor(cluster.url);
    const connection = createRedisConnection(redis, "producer", "test-quota");
    const deps = { redis: connection, redisPrefix: redis.prefix };
    try {
      expect(await admitHeldTurn(deps, "t1", "turn-a", 1, 60_000)).toEqual({ admitted: true, count: 1 });
      expect(await admitHeldTurn(deps, "t1", "turn-b", 1, 60_000)).toEqual({ admitted: false, count: 1 });
      expect(await countHeldTurns(deps, "t1")).toBe(1);
      expect(await admitProvisionInWindow(deps, "t1", 1, { consume: true })).toMatchObject({
        admitted: true,
      });
      expect(await admitProvisionInWindow(deps, "t1", 1, { consume: true })).toMatchObject({
        admitted: false,
      });
      expect(await withQuotaLock(deps, "mcp:t1", () => Promise.resolve("held"))).toBe("held");
    } finally {
      await connection.quit();
    }
  });
});

describeWithRedisServer("Berth behind Redis Sentinel (a master and one Sentinel)", () => {
  let sentinel: Awaited<ReturnType<typeof startRedisSentinel>>;
  let tenant: TestTenant;

  beforeAll(async () => {
    sentinel = await startRedisSentinel();
    tenant = await createTestTenant();
  }, 60_000);
  afterAll(async () => {
    await sentinel?.stop();
  });

  it("connects to the master the Sentinel names and runs jobs through the worker runtime", async () => {
    const redis = configFor(sentinel.url);
    expect(redis.prefix).toMatch(/^berth-topo-/);
    const probe: Redis = createRedisConnection(redis, "producer", "test-sentinel-probe");
    try {
      expect(await probe.info("server")).toContain(`tcp_port:${sentinel.masterPort}`);
    } finally {
      await probe.quit();
    }
    await auditThroughWorkers(redis, tenant);
  });
});
