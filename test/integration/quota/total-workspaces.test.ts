import { sessionServiceOver } from "@/test/setup/test-berth";
/**
 * `totalWorkspaces` is admitted in the transaction that creates the workspace record, under the tenant's
 * quota row lock: concurrent session creations never bind one workspace over the limit, and the refused
 * ones leave no session behind. Only owners change quotas; admins read them.
 */
import { cliOperatorActor } from "@/server/modules/operator/operator-actor";
import { setTenantQuotaOverrides } from "@/server/modules/operator/tenant-quota.service";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { secretKeyFromBytes } from "@/server/auth/secrets";
import { getConfig } from "@/server/config/config";
import { composeEngine } from "@/server/composition/compose-engine";
import { processBerth } from "@/server/composition/process-berth";
import type { WorkspaceEngine } from "@/server/engine/engine";
import { getDb } from "@/server/db";
import { createLogger } from "@/server/logger";
import { createAgentService } from "@/server/modules/agent/agent.service";
import { readTenantUsage } from "@/server/modules/quota/quota-admin.service";
import { getQueues } from "@/server/queue/queues";
import { AppError, isAppError } from "@/server/shared/errors";
import { createTestTenant, type TestTenant } from "../db/fixtures";
import { testEngineConfig } from "../workspace/harness";
import { closeProcessBerth } from "@/server/composition/process-berth";

describe("the total-workspaces quota", () => {
  let engine: WorkspaceEngine;
  let basedir: string;
  let tenant: TestTenant;

  beforeAll(async () => {
    basedir = await fs.mkdtemp(path.join(os.tmpdir(), "berth-quota-total-"));
    engine = composeEngine({
      quota: () => processBerth().quota,
      attachTracker: () => processBerth().attachTracker,
      usage: () => processBerth().usage,
      stageSamples: () => processBerth().stageSamples,
      lifecycle: processBerth().lifecycle,
      encryptionKey: processBerth().config.secrets.encryptionKey,
      db: processBerth().db,
      config: testEngineConfig(basedir),
      queues: getQueues(),
      secret: "quota-test-secret",
      log: createLogger({ level: "silent" }),
    });
    tenant = await createTestTenant();
  });
  afterAll(async () => {
    await engine.close();
    await closeProcessBerth();
    await fs.rm(basedir, { recursive: true, force: true });
  });

  it("binds exactly the limit under 30 concurrent session creations; the refused leave no session", async () => {
    const agent = await createAgentService({
      audit: processBerth().audit,
      db: processBerth().db,
      secretKey: secretKeyFromBytes(getConfig().secrets.encryptionKey),
      enqueueSessionPurge: () => Promise.reject(new AppError("INTERNAL", "not used here")),
      enqueueAgentPurge: () => Promise.reject(new AppError("INTERNAL", "not used here")),
      assertBackendChoosable: () => undefined,
    }).create(tenant.scope, {
      name: "per-session",
      modelConfig: { baseUrl: "http://127.0.0.1:9/v1", model: "m", apiKey: "k" },
      isolationPolicy: "PER_SESSION",
    });
    const deps = processBerth().quota;
    await setTenantQuotaOverrides(
      cliOperatorActor(),
      { tenantId: tenant.scope.tenantId, overrides: { totalWorkspaces: 5 } },
      deps,
      processBerth().db,
    );
    const sessions = sessionServiceOver(engine);
    const results = await Promise.allSettled(
      Array.from({ length: 30 }, () => sessions.create(tenant.scope, { agentId: agent.id })),
    );
    const refusals = results.flatMap((r) => (r.status === "rejected" ? [r.reason as unknown] : []));
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(5);
    expect(refusals).toHaveLength(25);
    for (const refusal of refusals) {
      expect(isAppError(refusal) && [refusal.code, refusal.details]).toEqual([
        "QUOTA_EXCEEDED",
        { limit: "totalWorkspaces", value: 5, used: 5 },
      ]);
    }
    expect(await getDb().workspace.count({ where: { tenantId: tenant.tenantId } })).toBe(5);
    expect(await getDb().session.count({ where: { tenantId: tenant.tenantId } })).toBe(5);
    const usage = await readTenantUsage(tenant.scope, deps, processBerth().db);
    expect(usage.limits.find((l) => l.limit === "totalWorkspaces")).toMatchObject({
      value: 5,
      overridden: true,
      used: 5,
    });
  });
});
