import { Job, type QueueEvents } from "bullmq";
import type { Redis } from "ioredis";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { RedisConfig } from "@/server/config/redis";
import { createEnqueue, type Enqueue } from "@/server/queue/enqueue";
import type { QueueSet } from "@/server/queue/queues";
import { AppError } from "@/server/shared/errors";
import { ProcessorRegistry, startWorkers, type WorkerPool } from "@/workers/registry";
import {
  isolatedRedisConfig,
  openTestQueues,
  testCatalog,
  testLog,
  type TestCatalog,
} from "../queue/queue-fixtures";

describe("worker registry (real Redis + BullMQ)", () => {
  let redis: RedisConfig;
  let queues: QueueSet<TestCatalog>;
  let connection: Redis;
  let enqueue: Enqueue<TestCatalog>;
  let pool: WorkerPool | undefined;
  let events: QueueEvents;

  beforeEach(async () => {
    redis = isolatedRedisConfig();
    ({ queues, connection } = openTestQueues(redis));
    enqueue = createEnqueue(queues);
    events = await queues.events("test-main");
  });
  afterEach(async () => {
    await pool?.close();
    pool = undefined;
    await queues.close();
    await connection.quit();
  });

  async function start(register: (registry: ProcessorRegistry<TestCatalog>) => void): Promise<void> {
    const registry = new ProcessorRegistry(testCatalog);
    register(registry);
    pool = await startWorkers({ registry, redis, concurrency: 2, log: testLog });
  }

  it("hands the processor the payload re-validated with zod (defaults applied)", async () => {
    const seen: unknown[] = [];
    await start((registry) =>
      registry.registerProcessor("test.echo", ({ payload }) => {
        seen.push(payload);
        return Promise.resolve({ echoed: payload.itemId });
      }),
    );
    const job = await enqueue("test.echo", { itemId: "a1" });
    await expect(job.waitUntilFinished(events)).resolves.toEqual({ echoed: "a1" });
    expect(seen).toEqual([{ itemId: "a1", note: "none" }]);
  });

  it("fails a job whose stored payload no longer matches the schema once, without retries", async () => {
    let calls = 0;
    await start((registry) =>
      registry.registerProcessor("test.flaky", () => {
        calls += 1;
        return Promise.resolve();
      }),
    );
    // Written around enqueue() on purpose: stands for a job enqueued by an older release.
    const job = await queues.get("test-main").add("test.flaky", { failTimes: "many" }, { attempts: 3 });
    await expect(job.waitUntilFinished(events)).rejects.toThrow(/BAD_REQUEST: invalid payload/);
    const stored = await Job.fromId(queues.get("test-main"), job.id!);
    expect(stored?.attemptsMade).toBe(1);
    expect(calls).toBe(0);
  });

  it("maps a non-retryable AppError to UnrecoverableError: failed after one attempt, code kept", async () => {
    let calls = 0;
    await start((registry) =>
      registry.registerProcessor("test.flaky", ({ payload }) => {
        calls += 1;
        return Promise.reject(new AppError(payload.code, "workspace ws_9 does not exist"));
      }),
    );
    const job = await enqueue("test.flaky", { failTimes: 5, code: "NOT_FOUND" });
    await expect(job.waitUntilFinished(events)).rejects.toThrow("NOT_FOUND: workspace ws_9 does not exist");
    const stored = await Job.fromId(queues.get("test-main"), job.id!);
    expect(await stored?.getState()).toBe("failed");
    expect(stored?.attemptsMade).toBe(1);
    expect(calls).toBe(1);
  });

  it("retries a retryable AppError with the catalog's backoff until it succeeds", async () => {
    const attemptsAt: number[] = [];
    await start((registry) =>
      registry.registerProcessor("test.flaky", ({ payload, job }) => {
        attemptsAt.push(Date.now());
        if (job.attemptsMade < payload.failTimes)
          return Promise.reject(new AppError(payload.code, "backend busy"));
        return Promise.resolve("done");
      }),
    );
    const job = await enqueue("test.flaky", { failTimes: 2, code: "UNAVAILABLE" });
    await expect(job.waitUntilFinished(events)).resolves.toBe("done");
    expect(attemptsAt).toHaveLength(3);
    // fixed backoff of 100 ms between attempts (a lower bound: the scheduler may only be later)
    expect(attemptsAt[1]! - attemptsAt[0]!).toBeGreaterThanOrEqual(95);
    expect(attemptsAt[2]! - attemptsAt[1]!).toBeGreaterThanOrEqual(95);
  });

  it("gives up after the catalog's attempts when a retryable error persists", async () => {
    let calls = 0;
    await start((registry) =>
      registry.registerProcessor("test.flaky", () => {
        calls += 1;
        return Promise.reject(new Error("socket hang up"));
      }),
    );
    const job = await enqueue("test.flaky", { failTimes: 99, code: "UNAVAILABLE" });
    await expect(job.waitUntilFinished(events)).rejects.toThrow("socket hang up");
    expect(calls).toBe(3);
  });

  it("graceful close lets a job in flight finish before it resolves", async () => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let started!: () => void;
    const jobStarted = new Promise<void>((resolve) => (started = resolve));
    await start((registry) =>
      registry.registerProcessor("test.slow", async ({ payload }) => {
        started();
        await released;
        return `finished ${payload.label}`;
      }),
    );
    const slowEvents = await queues.events("test-slow");
    const job = await enqueue("test.slow", { label: "in-flight" });
    await jobStarted;

    let closed = false;
    const closing = pool!.close().then(() => (closed = true));
    pool = undefined;
    // Let every already-runnable continuation run: close must still be waiting for the job.
    await new Promise((resolve) => setImmediate(resolve));
    expect(closed).toBe(false);

    release();
    await closing;
    await expect(job.waitUntilFinished(slowEvents)).resolves.toBe("finished in-flight");
    const stored = await Job.fromId(queues.get("test-slow"), job.id!);
    expect(await stored?.getState()).toBe("completed");
  });

  it("refuses processors for jobs that are not in the catalog, and duplicates", () => {
    const registry = new ProcessorRegistry(testCatalog);
    // @ts-expect-error -- not a job of this catalog
    expect(() => registry.registerProcessor("test.nope", () => Promise.resolve())).toThrow(
      /not in the catalog/,
    );
    registry.registerProcessor("test.echo", () => Promise.resolve());
    expect(() => registry.registerProcessor("test.echo", () => Promise.resolve())).toThrow(
      /already has a processor/,
    );
    expect(registry.queues()).toEqual(["test-main"]);
  });
});
