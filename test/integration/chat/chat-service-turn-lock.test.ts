import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { loadRedisConfig } from "@/server/config/redis";
import { RedisTurnLock } from "@/server/modules/chat/redis-turn-lock";

/** The Redis turn lock on real Redis: owner tokens, expiry of a crashed holder, cancel delivery. */
const config = loadRedisConfig();
const connections: Redis[] = [];
const lock = () => {
  const redis = new Redis(config.url);
  const subscriber = new Redis(config.url);
  connections.push(redis, subscriber);
  return new RedisTurnLock({ redis, subscriber, prefix: `${config.prefix}:lock-test` });
};
let a: RedisTurnLock;
let b: RedisTurnLock;

beforeAll(() => {
  [a, b] = [lock(), lock()];
});

afterAll(() => {
  for (const connection of connections) connection.disconnect();
});

describe("RedisTurnLock", () => {
  it("lets one owner hold a session; only that owner renews or releases it", async () => {
    const session = randomUUID();
    expect(await a.acquire(session, "owner-a", 60_000)).toBe(true);
    expect(await b.acquire(session, "owner-b", 60_000)).toBe(false);
    expect(await b.renew(session, "owner-b", 60_000)).toBe(false);
    await b.release(session, "owner-b");
    expect(await b.acquire(session, "owner-b", 60_000)).toBe(false);
    expect(await a.renew(session, "owner-a", 60_000)).toBe(true);
    await a.release(session, "owner-a");
    expect(await b.acquire(session, "owner-b", 60_000)).toBe(true);
  });

  it("frees the session of a holder that stopped renewing (crashed process) once the TTL passes", async () => {
    const session = randomUUID();
    expect(await a.acquire(session, "crashed", 200)).toBe(true);
    await vi.waitFor(async () => expect(await b.acquire(session, "survivor", 60_000)).toBe(true), {
      timeout: 10_000,
      interval: 50,
    });
    // The old owner can neither extend nor delete the new owner's lock.
    expect(await a.renew(session, "crashed", 60_000)).toBe(false);
    await a.release(session, "crashed");
    expect(await a.acquire(session, "third", 60_000)).toBe(false);
  });

  it("delivers a cancel request from another process to the holder only while it holds the lock", async () => {
    const session = randomUUID();
    expect(await b.requestCancel(session)).toBe(false);
    await a.acquire(session, "holder", 60_000);
    const cancelled = new Promise<void>((resolve) => void a.onCancelRequested(session, resolve));
    await vi.waitFor(async () => expect(await b.requestCancel(session)).toBe(true), { timeout: 10_000 });
    await cancelled;
  });
});
