import type { Redis } from "ioredis";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createEnqueue } from "@/server/queue/enqueue";
import type { QueueSet } from "@/server/queue/queues";
import { deterministicJobId } from "@/server/queue/types";
import { AppError } from "@/server/shared/errors";
import { isolatedRedisConfig, openTestQueues, type TestCatalog } from "./queue-fixtures";

describe("enqueue (real Redis)", () => {
  let queues: QueueSet<TestCatalog>;
  let connection: Redis;

  beforeEach(() => {
    ({ queues, connection } = openTestQueues(isolatedRedisConfig()));
  });
  afterEach(async () => {
    await queues.close();
    await connection.quit();
  });

  it("enqueues the same explicit jobId twice as ONE job (the first payload wins)", async () => {
    const enqueue = createEnqueue(queues);
    const jobId = deterministicJobId("test.slow", "ws_1");
    const first = await enqueue("test.slow", { label: "first" }, { jobId });
    const second = await enqueue("test.slow", { label: "second" }, { jobId });

    expect(second.id).toBe(first.id);
    expect(await queues.get("test-slow").getJobCounts("waiting")).toEqual({ waiting: 1 });
    const stored = await queues.get("test-slow").getJob(jobId);
    expect(stored?.data).toEqual({ label: "first" });
  });

  it("derives the job id from the payload when the catalog says how", async () => {
    const enqueue = createEnqueue(queues);
    const a = await enqueue("test.echo", { itemId: "item-7" });
    const b = await enqueue("test.echo", { itemId: "item-7", note: "again" });
    const c = await enqueue("test.echo", { itemId: "item-8" });

    expect(a.id).toBe("test.echo__item-7");
    expect(b.id).toBe(a.id);
    expect(c.id).toBe("test.echo__item-8");
    expect(await queues.get("test-main").getWaitingCount()).toBe(2);
  });

  it("applies the catalog's defaults (zod defaults, attempts and backoff)", async () => {
    const enqueue = createEnqueue(queues);
    const echo = await enqueue("test.echo", { itemId: "x1" });
    expect(echo.data).toEqual({ itemId: "x1", note: "none" });
    const flaky = await enqueue("test.flaky", { failTimes: 0, code: "UNAVAILABLE" });
    expect(flaky.opts.attempts).toBe(3);
    expect(flaky.opts.backoff).toEqual({ type: "fixed", delay: 100 });
  });

  it("deduplicates by deduplicationId while the first job is pending, without fixing the job id", async () => {
    const enqueue = createEnqueue(queues);
    const first = await enqueue("test.slow", { label: "a" }, { deduplicationId: "flush" });
    const second = await enqueue("test.slow", { label: "b" }, { deduplicationId: "flush" });
    expect(second.id).toBe(first.id);
    expect(await queues.get("test-slow").getWaitingCount()).toBe(1);
  });

  it("rejects an invalid payload at the producer with BAD_REQUEST and enqueues nothing", async () => {
    const enqueue = createEnqueue(queues);
    // @ts-expect-error -- itemId must be a string: the catalog types the payload
    const attempt = enqueue("test.echo", { itemId: 42 });
    await expect(attempt).rejects.toBeInstanceOf(AppError);
    await expect(attempt).rejects.toMatchObject({ code: "BAD_REQUEST" });
    expect(await queues.get("test-main").getWaitingCount()).toBe(0);
  });

  it("refuses ':' in deterministic ids (BullMQ's key separator)", () => {
    expect(deterministicJobId("workspace.provision", "ws_1", 3)).toBe("workspace.provision__ws_1__3");
    expect(() => deterministicJobId("x", "a:b")).toThrow(/must not contain ":"/);
  });
});
