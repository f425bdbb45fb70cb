/**
 * The sign-in route as `npm start` serves it (app/api/auth route → sign-in guard → better-auth), called with
 * the X-Forwarded-For that scripts/start.ts sets (the resolved client address; start's own handling is
 * covered by test/e2e/web-security.test.ts). Failures are throttled per address AND per account, shared
 * through Redis, and written to the account's tenants' audit log with address and user agent.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POST as authPost } from "@/app/api/auth/[...all]/route";
import { getConfig } from "@/server/config/config";
import { DEFAULT_SIGN_IN_LIMITS } from "@/server/auth/sign-in-guard";
import { listAuditLogs } from "@/server/modules/audit/audit.data";
import { flushAuditBuffer } from "@/server/modules/audit/audit-buffer.service";
import { getRedis } from "@/server/redis";
import { createTestTenant, type TestTenant } from "../db/fixtures";
import { closeProcessBerth, processBerth } from "@/server/composition/process-berth";

const BASE = "http://localhost:3000";
const randomAddress = () => `198.51.${randomBytes(1)[0]}.${randomBytes(1)[0]! % 250}`;

function signIn(email: string, password: string, address: string): Promise<Response> {
  return authPost(
    new Request(`${BASE}/api/auth/sign-in/email`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        origin: BASE,
        "x-forwarded-for": address,
        "user-agent": "throttle-test/1.0",
      },
      body: JSON.stringify({ email, password }),
    }),
  );
}

let tenant: TestTenant;

beforeAll(async () => {
  tenant = await createTestTenant(processBerth().api.auth);
});

afterAll(async () => {
  await closeProcessBerth();
});

describe("sign-in throttle", () => {
  it("locks an account after repeated failures even when every guess comes from a new address", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < DEFAULT_SIGN_IN_LIMITS.maxFailuresPerAccount + 5; i++) {
      statuses.push((await signIn(tenant.owner.email, `wrong-${i}`, randomAddress())).status);
    }
    expect(statuses.slice(0, DEFAULT_SIGN_IN_LIMITS.maxFailuresPerAccount)).toEqual(
      Array(DEFAULT_SIGN_IN_LIMITS.maxFailuresPerAccount).fill(401),
    );
    expect(statuses.slice(DEFAULT_SIGN_IN_LIMITS.maxFailuresPerAccount)).toEqual(Array(5).fill(429));
    // Locked means locked: the right password waits too (the guess that hits it would otherwise win).
    const right = await signIn(tenant.owner.email, tenant.owner.password, randomAddress());
    expect(right.status).toBe(429);
    expect(Number(right.headers.get("retry-after"))).toBeGreaterThan(0);
  });

  it("throttles one address guessing across many accounts, without locking those accounts elsewhere", async () => {
    const other = await createTestTenant(processBerth().api.auth);
    const address = randomAddress();
    const statuses: number[] = [];
    for (let i = 0; i < DEFAULT_SIGN_IN_LIMITS.maxFailuresPerAddress; i++) {
      statuses.push(
        (await signIn(`nobody-${i}-${randomBytes(3).toString("hex")}@example.test`, "x", address)).status,
      );
    }
    expect(statuses).toEqual(Array(DEFAULT_SIGN_IN_LIMITS.maxFailuresPerAddress).fill(401));
    expect((await signIn(other.owner.email, other.owner.password, address)).status).toBe(429);
    expect((await signIn(other.owner.email, other.owner.password, randomAddress())).status).toBe(200);
  });

  it("records failed and refused sign-ins in the tenant's audit log with address and user agent", async () => {
    await flushAuditBuffer({
      db: processBerth().db,
      redis: getRedis(),
      redisPrefix: getConfig().redis.prefix,
    });
    const page = await listAuditLogs(tenant.scope, { action: "auth.sign-in", limit: 200 }, processBerth().db);
    const reasons = page.items.map((row) => (row.details as { reason?: string } | null)?.reason);
    expect(reasons.filter((r) => r === "invalid_credentials")).toHaveLength(
      DEFAULT_SIGN_IN_LIMITS.maxFailuresPerAccount,
    );
    expect(reasons.filter((r) => r === "throttled").length).toBeGreaterThanOrEqual(6);
    for (const row of page.items) {
      expect(row).toMatchObject({
        outcome: "failure",
        actorType: "user",
        actorId: tenant.owner.id,
        targetId: tenant.owner.id,
        userAgent: "throttle-test/1.0",
      });
      expect(row.ip).toMatch(/^198\.51\.\d+\.\d+$/);
    }
  });
});
