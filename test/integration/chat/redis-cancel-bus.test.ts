import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { loadRedisConfig } from "@/server/config/redis";
import { RedisCancelBus } from "@/server/modules/chat/redis-cancel-bus";

/**
 * The Redis cancel bus on real Redis: a cancel request reaches the process running the session's turn,
 * and only while it listens. (The one-turn claim itself is in Postgres: chat-turn.data.ts.)
 */
const config = loadRedisConfig();
const connections: Redis[] = [];
const bus = () => {
  const redis = new Redis(config.url);
  const subscriber = new Redis(config.url);
  connections.push(redis, subscriber);
  return new RedisCancelBus({ redis, subscriber, prefix: `${config.prefix}:cancel-test` });
};
let a: RedisCancelBus;
let b: RedisCancelBus;

beforeAll(() => {
  [a, b] = [bus(), bus()];
});

afterAll(() => {
  for (const connection of connections) connection.disconnect();
});

describe("RedisCancelBus", () => {
  it("delivers a cancel request from another process to the runner only while it listens", async () => {
    const session = randomUUID();
    expect(await b.requestCancel(session)).toBe(false);
    let heard!: () => void;
    const cancelled = new Promise<void>((resolve) => (heard = resolve));
    const unsubscribe = await a.onCancelRequested(session, () => heard());
    await vi.waitFor(async () => expect(await b.requestCancel(session)).toBe(true), { timeout: 10_000 });
    await cancelled;
    unsubscribe();
    await vi.waitFor(async () => expect(await b.requestCancel(session)).toBe(false), { timeout: 10_000 });
  });
});
