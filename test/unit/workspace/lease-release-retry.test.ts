import { describe, expect, it, vi } from "vitest";
import type { TenantScope } from "@/server/auth/scope";
import { createLogger } from "@/server/logger";
import {
  createLeaseReleaseRetry,
  type PendingLeaseRelease,
} from "@/server/modules/workspace/lease-release-retry";

/**
 * The retry of failed lease releases on its own (the outage itself: test/integration/faults/
 * lease-release-outage.test.ts): retried while the database is away, each release landing once, the idle
 * clock moved to when the work ended, memory bounded, nothing retried after close.
 */
const log = createLogger({ level: "silent" });
const scope = { tenantId: "tenant-1" } as TenantScope;
const refused = () =>
  Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" });

function database() {
  let up = false;
  const leases = new Set<string>();
  const touched: { workspaceId: string; at: Date }[] = [];
  return {
    leases,
    touched,
    bringUp: () => (up = true),
    release: vi.fn((pending: PendingLeaseRelease) =>
      up ? Promise.resolve(leases.delete(pending.holder)) : Promise.reject(refused()),
    ),
    touch: (pending: PendingLeaseRelease) => {
      touched.push({ workspaceId: pending.workspaceId, at: pending.endedAt });
      return Promise.resolve();
    },
  };
}

const pendingFor = (holder: string, endedAt = new Date()): PendingLeaseRelease => ({
  scope,
  workspaceId: `ws-${holder}`,
  holder,
  quiet: false,
  endedAt,
});

describe("lease release retry", () => {
  it("retries while the database is away and releases each lease once it is back", async () => {
    const db = database();
    const retry = createLeaseReleaseRetry({ ...db, log, giveUpAfterMs: 3_600_000 });
    const endedAt = new Date(Date.now() - 5_000);
    for (const holder of ["turn:a", "turn:b", "call:c"]) {
      db.leases.add(holder);
      retry.schedule(pendingFor(holder, endedAt));
    }
    await vi.waitFor(() => expect(db.release.mock.calls.length).toBeGreaterThanOrEqual(2), {
      timeout: 5_000,
    });
    expect(retry.pending()).toBe(3);

    db.bringUp();
    await vi.waitFor(() => expect(retry.pending()).toBe(0), { timeout: 10_000, interval: 20 });
    expect(db.leases.size).toBe(0);
    expect(db.touched).toEqual(
      ["turn:a", "turn:b", "call:c"].map((h) => ({ workspaceId: `ws-${h}`, at: endedAt })),
    );
    await retry.close();
  });

  it("keeps at most maxPending releases, drops a cancelled one, and retries nothing after close", async () => {
    const db = database();
    const retry = createLeaseReleaseRetry({ ...db, log, giveUpAfterMs: 3_600_000, maxPending: 3 });
    for (const holder of ["h1", "h2", "h3", "h4"]) retry.schedule(pendingFor(holder));
    expect(retry.pending()).toBe(3);
    retry.cancel(scope, "ws-h2", "h2");
    expect(retry.pending()).toBe(2);

    await retry.close();
    expect(retry.pending()).toBe(0);
    const callsAtClose = db.release.mock.calls.length;
    retry.schedule(pendingFor("h5"));
    expect(retry.pending()).toBe(0);
    db.bringUp();
    // Poll a while: no retry pass may start once closed.
    for (let i = 0; i < 10; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(db.release.mock.calls.length).toBe(callsAtClose);
    }
  });
});
