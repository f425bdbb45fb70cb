/**
 * The database goes away exactly as a turn ends (a loopback TCP proxy in front of PostgreSQL cuts every
 * connection the moment the lease's DELETE is sent): the release fails in a process that stays alive, so
 * the dead-holder cleanup would never free the lease and the workspace could not be idle-stopped until the
 * maximum lease age. The release is retried instead: once the database is back, the lease is gone (released
 * by its own process, not the dead-holder path) and the sweeper's idle decision stops the workspace. A
 * process that shuts down before its retry lands leaves the lease to the dead-holder cleanup, which frees it.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { getDb } from "@/server/db";
import { createLogger } from "@/server/logger";
import { reapDeadHolders } from "@/server/modules/chat/dead-holders";
import { loadRedisConfig } from "@/server/config/redis";
import { processLiveness } from "@/server/queue/heartbeat";
import { getRedis } from "@/server/redis";
import { listWorkspaceEvents } from "@/server/modules/workspace/workspace.data";
import { stopIfIdle } from "@/server/modules/workspace/workspace-lifecycle.data";
import {
  databaseServerOf,
  databaseUrlThrough,
  startTcpProxy,
  type TcpProxy,
} from "../../fixtures/faults/tcp-proxy";
import { createTestTenant, type TestTenant } from "../db/fixtures";
import { startChild, stopChildren, type Child } from "../multiprocess/processes";
import { freshSession } from "../workspace/harness";
import { closeProcessBerth } from "@/server/composition/process-berth";

describe("a lease release that fails in a database outage", { timeout: 120_000 }, () => {
  let proxy: TcpProxy;
  let holder: Child;
  let tenant: TestTenant;
  let failed = false;

  beforeAll(async () => {
    proxy = await startTcpProxy(databaseServerOf(process.env.DATABASE_URL!));
    tenant = await createTestTenant();
    holder = startChild("../faults/lease-holder-process.ts", {
      DATABASE_URL: databaseUrlThrough(proxy, process.env.DATABASE_URL!),
      LOG_LEVEL: "silent",
    });
    await holder.nextLine((line) => line === "ready");
  });
  afterEach((context) => {
    failed ||= context.task.result?.state === "fail";
  });
  afterAll(async () => {
    if (holder) await stopChildren([holder], failed);
    await proxy?.close();
    await closeProcessBerth();
  });

  const leasesOf = (workspaceId: string) =>
    getDb().workspaceLease.findMany({
      where: { tenantId: tenant.tenantId, workspaceId },
      select: { holder: true, ownerId: true },
    });

  it("is retried until it lands once the database is back, and the workspace can then be idle-stopped", async () => {
    const { session, workspaceId } = await freshSession(tenant.scope);
    holder.process.stdin.write(`turn ${tenant.tenantId} ${session.id}\n`);
    const turnHolder = (await holder.nextLine((line) => line.startsWith("leased "))).slice("leased ".length);
    const [lease] = await leasesOf(workspaceId);
    expect(lease).toMatchObject({ holder: turnHolder, ownerId: expect.any(String) });

    // The turn ends; the database goes away just as its lease's DELETE is sent.
    proxy.outageOn(/DELETE FROM "public"\."workspace_leases"/);
    holder.process.stdin.write("end\n");
    await holder.nextLine((line) => line === "ended");
    expect(proxy.tripped()).toBe(true);
    expect(await leasesOf(workspaceId)).toEqual([lease]);

    proxy.restore();
    // Released by its own (live) process: no dead-holder reaper runs anywhere in this test.
    await vi.waitFor(async () => expect(await leasesOf(workspaceId)).toEqual([]), {
      timeout: 20_000,
      interval: 100,
    });
    const released = await listWorkspaceEvents(
      tenant.scope,
      workspaceId,
      { kinds: ["lease_released"] },
      getDb(),
    );
    expect(released).toHaveLength(1);
    expect(released[0]).toMatchObject({ reason: null, data: { holder: turnHolder } });

    // The sweeper's decision (leases younger than the maximum age keep a workspace): idle, so it stops.
    const decision = await stopIfIdle(
      tenant.scope,
      workspaceId,
      {
        idleBefore: new Date(Date.now() + 60_000),
        leaseBornAfter: new Date(Date.now() - 3_600_000),
        reason: "idle (test)",
      },
      getDb(),
    );
    expect(decision).toMatchObject({ outcome: "stopping" });
  });

  // Last: it shuts the holder process down.
  it("still pending when its process shuts down, it is freed by the dead-holder cleanup", async () => {
    const { session, workspaceId } = await freshSession(tenant.scope);
    holder.process.stdin.write(`turn ${tenant.tenantId} ${session.id}\n`);
    const turnHolder = (await holder.nextLine((line) => line.startsWith("leased "))).slice("leased ".length);
    proxy.outageOn(/DELETE FROM "public"\."workspace_leases"/);
    holder.process.stdin.write("end\n");
    await holder.nextLine((line) => line === "ended");
    expect(proxy.tripped()).toBe(true);

    // A clean shutdown while the database is still away: the retry cannot land, the heartbeat goes.
    holder.process.stdin.write("close\n");
    await holder.nextLine((line) => line === "closed");
    proxy.restore();
    expect(await leasesOf(workspaceId)).toHaveLength(1);

    // Any live process' reaper (this one's, here) sees the owner gone and frees its lease.
    const redisPrefix = loadRedisConfig().prefix;
    const reaped = await reapDeadHolders({
      db: getDb(),
      liveness: {
        ownerId: "lease-release-outage-test",
        classify: (ids) => processLiveness(getRedis(), redisPrefix, "holders", ids, 1_000),
      },
      turnTtlMs: 60_000,
      isRunningHere: () => false,
      log: createLogger({ level: "silent" }),
    });
    // At least this one: the reaper frees every dead holder's leases in the database, and earlier files of
    // the run (their processes gone) may have left some.
    expect(reaped.releasedLeases).toBeGreaterThanOrEqual(1);
    expect(await leasesOf(workspaceId)).toEqual([]);
    const released = await listWorkspaceEvents(
      tenant.scope,
      workspaceId,
      { kinds: ["lease_released"] },
      getDb(),
    );
    expect(released).toEqual([
      expect.objectContaining({
        reason: expect.stringContaining("no heartbeat"),
        data: expect.objectContaining({ holder: turnHolder }),
      }),
    ]);
  });
});
