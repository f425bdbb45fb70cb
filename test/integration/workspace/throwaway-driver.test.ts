import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, expect, it, vi } from "vitest";
import { z } from "zod";
import { composeEngine } from "@/server/composition/services";
import { createDriverSet } from "@/server/engine/driver-set";
import { loadEngineConfig } from "@/server/engine/engine-config";
import { getWorkspace } from "@/server/modules/workspace/workspace.data";
import { createWorkspaceService } from "@/server/modules/workspace/workspace.service";
import { jobCatalog } from "@/server/queue/catalog";
import { createQueues } from "@/server/queue/queues";
import { createRedisConnection } from "@/server/redis";
import type {
  BackendHandle,
  DriverDefinition,
  MachineController,
  WorkspaceSpec,
} from "@/server/workspace/backend/driver";
import { LocalBackendProvider, safePathSegment } from "@/server/workspace/backends/local/local-provider";
import { DRIVERS } from "@/server/workspace/backends/registry";
import { startWorkerRuntime, type WorkerRuntime } from "@/workers/runtime";
import { createTestTenant } from "../db/fixtures";
import { isolatedRedisConfig, testLog } from "../queue/queue-fixtures";
import { freshSession } from "./harness";

/**
 * What a newcomer adding a backend writes: ONE DriverDefinition (its config schema read from its own
 * variable, a provider, a machine controller) and ONE registry line. Nothing else in the engine, the
 * workers or the services changes, yet a session's workspace is provisioned on it by the real workers,
 * attached by the API side with the handle the provision stored, stopped and purged.
 */
const calls: string[] = [];
/** The handle as the calls log shows it (Postgres' jsonb does not keep key order). */
const handleLabel = (handle: BackendHandle | null | undefined) =>
  handle ? `${String(handle.folderName)}#${String(handle.attempt)}` : "none";

const ZThrowawayConfig = z.object({ folder: z.string().min(1) });

const throwawayDriver: DriverDefinition<z.output<typeof ZThrowawayConfig>> = {
  name: "throwaway",
  // A kind no registered driver of this test's installation uses.
  kind: "kubernetes",
  summary: "host folders under a folder of its own (a test's driver)",
  configSchema: ZThrowawayConfig,
  configFromEnv: (env, { basedir }) => ({ folder: env.THROWAWAY_FOLDER ?? path.join(basedir, "throwaway") }),
  create(config) {
    const provider = new LocalBackendProvider({ basedir: config.folder });
    const folderOf = (spec: WorkspaceSpec) => provider.workdirFor(spec);
    const machine: MachineController = {
      kind: "kubernetes",
      async provision(spec): Promise<BackendHandle> {
        calls.push(`provision ${spec.workspaceId} handle=${handleLabel(spec.handle)}`);
        await fs.mkdir(folderOf(spec), { recursive: true });
        return { folderName: safePathSegment(spec.workspaceId), attempt: calls.length };
      },
      stop(spec) {
        calls.push(`stop ${spec.workspaceId}`);
        return Promise.resolve();
      },
      async purge(spec) {
        calls.push(`purge ${spec.workspaceId}`);
        await fs.rm(folderOf(spec), { recursive: true, force: true });
        return [`folder:${spec.workspaceId}`];
      },
      exists: (spec) =>
        fs.stat(folderOf(spec)).then(
          () => true,
          () => false,
        ),
      listResources: () => Promise.resolve([]),
      reap: () => Promise.resolve(),
    };
    // The provider attaches with whatever handle the workers stored.
    const attach = provider.provision.bind(provider);
    provider.provision = (spec: WorkspaceSpec) => {
      calls.push(`attach ${spec.workspaceId} handle=${handleLabel(spec.handle)}`);
      return attach(spec);
    };
    return {
      name: "throwaway",
      kind: "kubernetes",
      capabilities: {
        isolated: false,
        persistent: true,
        hostPaths: true,
        pauseKeepsMemory: false,
        gateway: "host",
        mayVanish: false,
        pty: false,
      },
      isolation: { backend: "throwaway", isolated: false, sandbox: null },
      provider,
      machine,
    };
  },
};

let basedir: string;
let connection: Redis;
let workers: WorkerRuntime;
let close: () => Promise<void>;
let service: ReturnType<typeof createWorkspaceService>;

beforeAll(async () => {
  basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-throwaway-")));
  const registry = { ...DRIVERS, throwaway: throwawayDriver };
  const config = loadEngineConfig(
    { BERTH_WORKSPACE_BACKEND: "throwaway", BERTH_WORKSPACE_BASEDIR: basedir },
    process.cwd(),
    process.getuid?.() ?? -1,
    registry,
  );
  const drivers = createDriverSet(config, registry);
  const redis = isolatedRedisConfig();
  connection = createRedisConnection(redis, "producer", "test-throwaway");
  const queues = createQueues(jobCatalog, { connection, redis, log: testLog });
  const engine = composeEngine({
    config,
    queues,
    secret: randomBytes(16).toString("hex"),
    log: testLog,
    drivers,
  });
  service = createWorkspaceService(engine);
  workers = await startWorkerRuntime({
    redis,
    workers: { concurrency: 2, healthPort: 0, heartbeatTtlMs: 15_000 },
    log: testLog,
    healthPort: null,
    schedules: [],
    engine: { drivers, config, queues },
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
  await workspace.backend.writeFile("hello.txt", "from the throwaway driver");
  // Its files are where its own config put them, not in the base dir's layout.
  const folders = await fs.readdir(path.join(basedir, "throwaway", safePathSegment(tenant.tenantId)));
  expect(folders).toHaveLength(1);
  expect(await service.get(tenant.scope, workspaceId)).toMatchObject({
    backendKind: "kubernetes",
    backend: "throwaway",
    isolated: false,
  });
  // The workers provisioned it once, with no handle yet; the API side attached with the stored one.
  expect(calls).toEqual([
    `provision ${workspaceId} handle=none`,
    `attach ${workspaceId} handle=${workspaceId}#1`,
  ]);

  await service.requestStop(tenant.scope, workspaceId, { reason: "test" });
  await vi.waitFor(
    async () => expect((await getWorkspace(tenant.scope, workspaceId)).state).toBe("STOPPED"),
    {
      timeout: 15_000,
    },
  );
  // Back from a stop: the next provision gets the handle the first one stored.
  const again = await service.resolveForSession(tenant.scope, session.id);
  const text = await again.workspace.backend.readFile("hello.txt");
  const chunks: Buffer[] = [];
  for await (const chunk of text) chunks.push(chunk as Buffer);
  expect(Buffer.concat(chunks).toString()).toBe("from the throwaway driver");
  expect(calls).toContain(`provision ${workspaceId} handle=${workspaceId}#1`);

  await service.requestPurge(tenant.scope, workspaceId, { force: true });
  await vi.waitFor(async () => expect((await getWorkspace(tenant.scope, workspaceId)).state).toBe("PURGED"), {
    timeout: 15_000,
  });
  expect(calls).toContain(`purge ${workspaceId}`);
});
