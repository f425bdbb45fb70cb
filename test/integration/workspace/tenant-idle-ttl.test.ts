/**
 * The API process' workspace cache uses each tenant's own idle TTL (issue 12): the engine `npm start`
 * composes reads the tenants' policies (Postgres) at every eviction pass, so a tenant that set a shorter
 * TTL has its cached workspaces detached after it, and a tenant that cleared it is back on the
 * installation's. (The eviction itself, with a moved clock, is test/unit/workspace/manager.test.ts.)
 */
import { afterAll, describe, expect, it } from "vitest";
import { composeEngine } from "@/server/composition/compose-engine";
import { processBerth } from "@/server/composition/process-berth";
import { loadEngineConfig } from "@/server/engine/engine-config";
import { createLogger } from "@/server/logger";
import { updateTenantPolicy } from "@/server/modules/tenant/tenant-policy.data";
import { getQueues } from "@/server/queue/queues";
import { createTestTenant } from "../db/fixtures";
import { closeProcessBerth } from "@/server/composition/process-berth";

describe("the workspace cache's idle TTL", () => {
  const config = { ...loadEngineConfig(), idleTtlMs: 3_600_000 };
  const engine = composeEngine({
    quota: () => processBerth().quota,
    attachTracker: () => processBerth().attachTracker,
    usage: () => processBerth().usage,
    stageSamples: () => processBerth().stageSamples,
    lifecycle: processBerth().lifecycle,
    encryptionKey: processBerth().config.secrets.encryptionKey,
    db: processBerth().db,
    config,
    queues: getQueues(),
    secret: "tenant-idle-ttl-test",
    log: createLogger({ level: "silent" }),
  });

  afterAll(async () => {
    await engine.close();
    await closeProcessBerth();
  });

  it("follows each tenant's policy, read at every eviction pass", async () => {
    const short = await createTestTenant();
    const other = await createTestTenant();
    await updateTenantPolicy(short.scope, { workspaceIdleTtlMs: 120_000 }, processBerth().db);
    await engine.manager.evictIdle();
    expect(engine.manager.idleTtlOf(short.tenantId)).toBe(120_000);
    expect(engine.manager.idleTtlOf(other.tenantId)).toBe(3_600_000);

    await updateTenantPolicy(short.scope, { workspaceIdleTtlMs: null }, processBerth().db);
    await engine.manager.evictIdle();
    expect(engine.manager.idleTtlOf(short.tenantId)).toBe(3_600_000);
  });
});
