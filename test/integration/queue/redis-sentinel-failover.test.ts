import { randomBytes } from "node:crypto";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, expect, it, vi } from "vitest";
import { loadRedisConfig, type RedisConfig } from "@/server/config/redis";
import { jobCatalog, type BerthJobCatalog } from "@/server/queue/catalog";
import { createEnqueue } from "@/server/queue/enqueue";
import { aliveWorkers } from "@/server/queue/heartbeat";
import { createQueues, type QueueSet } from "@/server/queue/queues";
import { createRedisConnection } from "@/server/redis";
import { startWorkerRuntime, type WorkerRuntime } from "@/workers/runtime";
import {
  describeWithRedisServer,
  startRedisSentinelFailover,
  type RedisFailoverFixture,
} from "../../fixtures/redis-cluster/redis-topologies";
import { testLog } from "./queue-fixtures";

/** The port of the server a connection talks to (INFO server), or undefined while it cannot answer. */
async function servedBy(connection: Redis): Promise<number | undefined> {
  const info = await connection.info("server").catch(() => "");
  const port = /tcp_port:(\d+)/.exec(info)?.[1];
  return port ? Number(port) : undefined;
}

/** INCRs `key` one command after the other until stopped; every failure is kept (its message). */
function writeUntil(connection: Redis, key: string) {
  let running = true;
  const failed: string[] = [];
  let succeeded = 0;
  const loop = (async () => {
    while (running) {
      await connection.incr(key).then(
        () => (succeeded += 1),
        (error: Error) => failed.push(error.message),
      );
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return { failed, succeeded };
    },
  };
}

/**
 * A real failover: the Sentinel's master is SIGKILLed, the Sentinel promotes the replica, and connections
 * Berth opened before (the API side's producer, a worker runtime's blocking BullMQ connections and its
 * heartbeat) follow it: jobs enqueued after the failover are taken and finished by the same runtime.
 */
describeWithRedisServer("Berth through a Sentinel failover (master, replica, one Sentinel)", () => {
  let fixture: RedisFailoverFixture;
  let redis: RedisConfig;
  let producer: Redis;
  let queues: QueueSet<BerthJobCatalog>;
  let runtime: WorkerRuntime | undefined;

  beforeAll(async () => {
    fixture = await startRedisSentinelFailover();
    redis = loadRedisConfig({
      REDIS_URL: fixture.url,
      BERTH_REDIS_PREFIX: `berth-failover-${randomBytes(3).toString("hex")}`,
    });
    producer = createRedisConnection(redis, "producer", "test-failover-producer");
    queues = createQueues(jobCatalog, { connection: producer, redis, log: testLog });
    runtime = await startWorkerRuntime({
      redis,
      workers: { concurrency: 1, healthPort: 0, heartbeatTtlMs: 15_000 },
      log: testLog,
      healthPort: null,
      schedules: [],
    });
  }, 60_000);
  afterAll(async () => {
    await runtime?.stop();
    await queues?.close();
    await producer?.quit().catch(() => producer.disconnect());
    await fixture?.stop();
  });

  async function flushRunsToCompletion(): Promise<void> {
    const job = await createEnqueue(queues)("audit.flush", { trigger: "write" });
    await vi.waitFor(async () => expect(await queues.get("audit").getJobState(job.id!)).toBe("completed"), {
      timeout: 30_000,
      interval: 100,
    });
  }

  /** Waits until the Sentinel, and then Berth's producer connection, are on the server at `port`. */
  async function followedTo(port: number): Promise<void> {
    await vi.waitFor(async () => expect(await fixture.sentinelMasterPort()).toBe(port), {
      timeout: 30_000,
      interval: 100,
    });
    await vi.waitFor(async () => expect(await servedBy(producer)).toBe(port), {
      timeout: 30_000,
      interval: 100,
    });
  }

  async function stillWorks(step: string): Promise<void> {
    await producer.set(`${redis.prefix}:probe`, step);
    expect(await producer.get(`${redis.prefix}:probe`)).toBe(step);
    await flushRunsToCompletion();
    await flushRunsToCompletion();
    await vi.waitFor(async () => expect(await aliveWorkers(producer, redis.prefix, 15_000)).toHaveLength(1), {
      timeout: 20_000,
    });
  }

  it("follows a switchover (the old master demoted to a replica), then a crash of the new master", async () => {
    expect(await servedBy(producer)).toBe(fixture.masterPort);
    await flushRunsToCompletion();

    // Planned: both up, the old master turns read-only. Writes keep going meanwhile: a connection left on
    // the demoted master would answer READONLY until the Sentinel kills its clients (about 10 s later).
    const writes = writeUntil(producer, `${redis.prefix}:during`);
    expect(await fixture.switchover()).toBe("OK");
    await followedTo(fixture.replicaPort);
    expect(await writes.stop()).toEqual({ failed: [], succeeded: expect.any(Number) as number });
    await stillWorks("after the switchover");

    // Unplanned: the new master dies; the Sentinel promotes the demoted one once it has synced.
    await vi.waitFor(async () => expect(await fixture.replicaInSync(fixture.masterPort)).toBe(true), {
      timeout: 30_000,
      interval: 100,
    });
    await fixture.kill(fixture.replicaPort);
    await followedTo(fixture.masterPort);
    await stillWorks("after the crash");
  });
});
