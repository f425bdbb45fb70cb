import { workspaceServiceOver } from "@/test/setup/test-berth";
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Redis } from "ioredis";
import type { TenantScope } from "@/server/auth/scope";
import { secretKeyFromBytes } from "@/server/auth/secrets";
import type { RedisConfig } from "@/server/config/redis";
import type { WorkspaceEngine } from "@/server/engine/engine";
import { composeEngine } from "@/server/composition/compose-engine";
import { processBerth } from "@/server/composition/process-berth";
import type { EngineConfig } from "@/server/engine/engine-config";
import { HostFolderMachines } from "@/server/workspace/drivers/host-folder/host-folder-machines";
import type { CreateOptions, CreateProgress, WorkspaceDriver } from "@/server/workspace/drivers/driver";
import { createAgent } from "@/server/modules/agent/agent.data";
import { createSession } from "@/server/modules/session/session.data";
import { createWorkspaceService, type WorkspaceService } from "@/server/modules/workspace/workspace.service";
import {
  createWorkspaceContentService,
  type WorkspaceContentService,
} from "@/server/modules/workspace-content/workspace-content.service";
import { jobCatalog, type BerthJobCatalog } from "@/server/queue/catalog";
import { createQueues, type QueueSet } from "@/server/queue/queues";
import { createRedisConnection } from "@/server/redis";
import { assignWorkspaceId, isolationOfStored } from "@/server/workspace/manager/isolation";
import type { WorkspaceSpec } from "@/server/workspace/drivers/driver";
import { startWorkerRuntime, type WorkerRuntime } from "@/workers/runtime";
import { driverSetOf } from "@/server/engine/driver-set";
import { sandboxDriver } from "../../drivers/local/support/sandbox-env";
import { isolatedRedisConfig, testLog } from "../queue/queue-fixtures";

/** Counts the machine operations the workers perform (the "exactly one provision" proofs). */
export class CountingMachine extends HostFolderMachines {
  readonly provisioned: string[] = [];
  readonly stopped: string[] = [];
  /** Provisioning steps to report (as a Docker build would) before the machine is ready. */
  progressSteps: CreateProgress[] = [];
  override async create(spec: WorkspaceSpec, options: CreateOptions = {}) {
    this.provisioned.push(spec.workspaceId);
    for (const step of this.progressSteps) options.onProgress?.(step);
    return super.create(spec);
  }
  override async stop(spec: WorkspaceSpec) {
    this.stopped.push(spec.workspaceId);
    return super.stop(spec);
  }
}

export function testEngineConfig(basedir: string, overrides: Partial<EngineConfig> = {}): EngineConfig {
  return {
    backend: "local",
    basedir,
    idleTtlMs: 60_000,
    sweepIntervalMs: 60_000,
    reconcileIntervalMs: 3_600_000,
    maxLeaseMs: 3_600_000,
    leaseTtlMs: 60_000,
    provisionWaitMs: 60_000,
    downloadTokenTtlMs: 60_000,
    ...overrides,
  };
}

export type WorkspaceHarness = {
  basedir: string;
  redis: RedisConfig;
  queues: QueueSet<BerthJobCatalog>;
  machine: CountingMachine;
  /** The API side: an engine (one manager) and its service, as one API process has. */
  engine: WorkspaceEngine;
  service: WorkspaceService;
  content(): WorkspaceContentService;
  /** Another API "replica" in the same test process: its own manager, the same queues. */
  replica(): WorkspaceService;
  workers: WorkerRuntime;
  close(): Promise<void>;
};

/** Real Redis queues + in-process workers (H5's runtime) + API-side engines over one local basedir. */
export async function startWorkspaceHarness(
  overrides: Partial<EngineConfig> = {},
  options: {
    /** More backends beside the counted `local` one (the first stays the default). */
    moreDrivers?: (basedir: string) => WorkspaceDriver[];
    /** Another Redis than the run's (a Redis Cluster: redis-cluster.test.ts). */
    redis?: RedisConfig;
  } = {},
): Promise<WorkspaceHarness> {
  const basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-ws-")));
  const redis = options.redis ?? isolatedRedisConfig();
  const connection: Redis = createRedisConnection(redis, "producer", "test-workspace");
  const queues = createQueues(jobCatalog, { connection, redis, log: testLog });
  const config = testEngineConfig(basedir, overrides);
  let machine!: CountingMachine;
  const drivers = driverSetOf([
    sandboxDriver(basedir, { machines: (base) => (machine = new CountingMachine(base)) }),
    ...(options.moreDrivers?.(basedir) ?? []),
  ]);
  const secret = randomBytes(32).toString("hex");
  const engines: WorkspaceEngine[] = [];
  const newEngine = () => {
    const engine = composeEngine({
      quota: () => processBerth().quota,
      attachTracker: () => processBerth().attachTracker,
      usage: () => processBerth().usage,
      stageSamples: () => processBerth().stageSamples,
      lifecycle: processBerth().lifecycle,
      config,
      queues,
      secret,
      log: testLog,
      drivers,
      encryptionKey: processBerth().config.secrets.encryptionKey,
      db: processBerth().db,
    });
    engines.push(engine);
    return engine;
  };
  const engine = newEngine();
  const service = workspaceServiceOver(engine);
  const workers = await startWorkerRuntime({
    redis,
    workers: { concurrency: 4, healthPort: 0, heartbeatTtlMs: 15_000 },
    log: testLog,
    healthPort: null,
    schedules: [],
    engine: { drivers, config, queues, checkpoints: engine.checkpoints },
  });
  return {
    basedir,
    redis,
    queues,
    machine,
    engine,
    service,
    content: () =>
      createWorkspaceContentService(service, { db: processBerth().db, quota: () => processBerth().quota }),
    replica: () =>
      createWorkspaceService(newEngine(), {
        lifecycle: processBerth().lifecycle,
        audit: processBerth().audit,
        db: processBerth().db,
        attachTracker: () => processBerth().attachTracker,
        quota: () => processBerth().quota,
      }),
    workers,
    async close() {
      await workers.stop();
      await Promise.all(engines.map((e) => e.close()));
      await queues.close();
      await connection.quit();
      await fs.rm(basedir, { recursive: true, force: true });
    },
  };
}

const secretKey = secretKeyFromBytes(randomBytes(32));

/** An agent and a fresh session of it, bound (by the PER_AGENT rule) to a workspace nobody used yet. */
export async function freshSession(
  scope: TenantScope,
  isolation: "PER_AGENT" | "PER_SESSION" | "PER_USER" = "PER_AGENT",
  options: { userId?: string; backend?: "local" | "docker" | "e2b" | "kubernetes" } = {},
) {
  const agent = await createAgent(
    scope,
    {
      name: `agent-${randomBytes(4).toString("hex")}`,
      modelConfig: { provider: "openai", model: "test" },
      isolationPolicy: isolation,
      ...(options.backend ? { backend: options.backend } : {}),
    },
    secretKey,
    processBerth().db,
  );
  const workspaceId = assignWorkspaceId(isolationOfStored(isolation), {
    tenantId: scope.tenantId,
    userId: options.userId ?? scope.userId ?? "",
    agentId: agent.id,
  });
  const session = await createSession(scope, { agentId: agent.id, workspaceId }, processBerth().db);
  return { agent, session, workspaceId };
}
