import { workspaceServiceOver } from "@/test/setup/test-berth";
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, expect, it, vi } from "vitest";
import { secretKeyFromBytes } from "@/server/auth/secrets";
import { getConfig } from "@/server/config/config";
import { composeEngine } from "@/server/composition/compose-engine";
import { processBerth } from "@/server/composition/process-berth";
import {
  createBackendSettingsService,
  tenantDriverSettings,
} from "@/server/modules/backend-settings/backend-settings.service";
import { createDriverSet } from "@/server/engine/driver-set";
import { loadEngineConfig } from "@/server/engine/engine-config";
import { getWorkspace } from "@/server/modules/workspace/workspace.data";
import { type createWorkspaceService } from "@/server/modules/workspace/workspace.service";
import { jobCatalog } from "@/server/queue/catalog";
import { createQueues } from "@/server/queue/queues";
import { createRedisConnection } from "@/server/redis";
import { safePathSegment } from "@/server/workspace/drivers/host-folder/folder-layout";
import { DRIVERS } from "@/server/workspace/drivers/registry";
import { startWorkerRuntime, type WorkerRuntime } from "@/workers/runtime";
import { throwawayCalls, throwawayDriver } from "../../fixtures/throwaway-driver/driver";
import { createTestTenant } from "../db/fixtures";
import { isolatedRedisConfig, testLog } from "../queue/queue-fixtures";
import { freshSession } from "./harness";

/**
 * What a newcomer adding a backend writes: ONE folder (test/fixtures/throwaway-driver: a DriverDefinition
 * of a kind nothing in Berth names) and ONE registry line. No migration (the stored kind is text), no list
 * of kinds, labels or settings elsewhere: a session's workspace is stored with kind `throwaway`, provisioned
 * on it by the real workers, attached by the API side with the handle the provision stored, offered by the
 * dashboard's backend list with its driver's label, stopped and purged.
 */
const calls = throwawayCalls;

let basedir: string;
let connection: Redis;
let workers: WorkerRuntime;
let close: () => Promise<void>;
let service: ReturnType<typeof createWorkspaceService>;
const registry = { ...DRIVERS, throwaway: throwawayDriver };

beforeAll(async () => {
  basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-throwaway-")));
  const config = loadEngineConfig(
    {
      BERTH_WORKSPACE_BACKEND: "throwaway",
      BERTH_WORKSPACE_BASEDIR: basedir,
      // Its kind is a metering key like the shipped ones' (checked against the registry in use).
      BERTH_METERING_RATES: JSON.stringify({ throwaway: { workspaceHour: 2 } }),
    },
    process.cwd(),
    process.getuid?.() ?? -1,
    registry,
  );
  const drivers = createDriverSet(config, registry);
  const redis = isolatedRedisConfig();
  connection = createRedisConnection(redis, "producer", "test-throwaway");
  const queues = createQueues(jobCatalog, { connection, redis, log: testLog });
  const engine = composeEngine({
    quota: () => processBerth().quota,
    attachTracker: () => processBerth().attachTracker,
    usage: () => processBerth().usage,
    stageSamples: () => processBerth().stageSamples,
    lifecycle: processBerth().lifecycle,
    encryptionKey: processBerth().config.secrets.encryptionKey,
    db: processBerth().db,
    config,
    queues,
    secret: randomBytes(16).toString("hex"),
    log: testLog,
    drivers,
  });
  service = workspaceServiceOver(engine);
  workers = await startWorkerRuntime({
    redis,
    workers: { concurrency: 2, healthPort: 0, heartbeatTtlMs: 15_000 },
    log: testLog,
    healthPort: null,
    schedules: [],
    engine: { drivers, config, queues, checkpoints: engine.checkpoints },
  });
  close = async () => {
    await workers.stop();
    await engine.close();
    await queues.close();
    await connection.quit();
  };
});

afterAll(async () => {
  await close?.();
  await fs.rm(basedir, { recursive: true, force: true });
});

it("a driver added through a registry entry alone runs a workspace end to end", async () => {
  const tenant = await createTestTenant();
  const { session, workspaceId } = await freshSession(tenant.scope);
  const { workspace } = await service.resolveForSession(tenant.scope, session.id);
  // (Its backend objects are LocalBackends: the driver, not the class, says which backend this is.)
  await workspace.machine.writeFile("hello.txt", "from the throwaway driver");
  // Its files are where its own config put them, not in the base dir's layout.
  const folders = await fs.readdir(path.join(basedir, "throwaway", safePathSegment(tenant.tenantId)));
  expect(folders).toHaveLength(1);
  expect(await service.get(tenant.scope, workspaceId)).toMatchObject({
    backendKind: "throwaway",
    backend: "throwaway",
    isolated: false,
  });
  // Stored as its kind in Postgres: text, no enum to migrate.
  expect((await getWorkspace(tenant.scope, workspaceId, processBerth().db)).backendKind).toBe("throwaway");
  // The dashboard's list of backends (workspace.backends) and the instructions read its definition.
  const options = await service.backends.options(tenant.scope);
  expect(options.available).toEqual([
    expect.objectContaining({ kind: "throwaway", driver: "throwaway", label: "throwaway", isolated: false }),
  ]);
  expect(workspace.getInstructions()).toContain("You have access to a throwaway workspace");
  // Its tenant settings (declared in its definition) are stored, sealed and handed back like E2B's.
  const secretKey = secretKeyFromBytes(getConfig().secrets.encryptionKey);
  const settings = createBackendSettingsService({
    audit: processBerth().audit,
    db: processBerth().db,
    secretKey,
    registry,
    enabledKinds: () => ["throwaway"],
  });
  const [form] = await settings.forms(tenant.scope);
  expect(form?.fields.map((field) => [field.name, field.title, field.secret])).toEqual([
    ["motto", "Motto", false],
    ["token", "Token", true],
  ]);
  const saved = await settings.set(tenant.scope, {
    backend: "throwaway",
    settings: { motto: "made to be thrown away", token: "throwaway-token-1234" },
  });
  expect(saved).toMatchObject({ secretHint: "…1234", values: { motto: "made to be thrown away" } });
  expect(
    await tenantDriverSettings(secretKey, processBerth().db, registry).forTenant(
      "throwaway",
      tenant.tenantId,
    ),
  ).toEqual({
    motto: "made to be thrown away",
    token: "throwaway-token-1234",
  });
  // The workers provisioned it once, with no handle yet; the API side attached with the stored one.
  expect(calls).toEqual([
    `provision ${workspaceId} handle=none`,
    `attach ${workspaceId} handle=${workspaceId}#1`,
  ]);

  await service.requestStop(tenant.scope, workspaceId, { reason: "test" });
  await vi.waitFor(
    async () =>
      expect((await getWorkspace(tenant.scope, workspaceId, processBerth().db)).state).toBe("STOPPED"),
    {
      timeout: 15_000,
    },
  );
  // Back from a stop: the next provision gets the handle the first one stored.
  const again = await service.resolveForSession(tenant.scope, session.id);
  const text = await again.workspace.machine.readFile("hello.txt");
  const chunks: Buffer[] = [];
  for await (const chunk of text) chunks.push(chunk as Buffer);
  expect(Buffer.concat(chunks).toString()).toBe("from the throwaway driver");
  expect(calls).toContain(`provision ${workspaceId} handle=${workspaceId}#1`);

  await service.requestPurge(tenant.scope, workspaceId, { force: true });
  await vi.waitFor(
    async () =>
      expect((await getWorkspace(tenant.scope, workspaceId, processBerth().db)).state).toBe("PURGED"),
    {
      timeout: 15_000,
    },
  );
  expect(calls).toContain(`purge ${workspaceId}`);
});
