import { randomUUID } from "node:crypto";
import os from "node:os";
import type { Redis } from "ioredis";
import { secretKeyFromBytes } from "@/server/auth/secrets";
import { getConfig } from "@/server/config/config";
import { loadRedisConfig } from "@/server/config/redis";
import { loadWorkersConfig } from "@/server/config/workers";
import { createEngine, type CreateEngineOptions, type WorkspaceEngine } from "@/server/engine/engine";
import { loadEngineConfig } from "@/server/engine/engine-config";
import { getLogger } from "@/server/logger";
import { createAgentServices, type AgentServices } from "@/server/modules/chat/chat.composition";
import { RedisTurnEventLog } from "@/server/modules/chat/turn-event-log";
import { RedisCancelBus } from "@/server/modules/chat/redis-cancel-bus";
import type { Liveness } from "@/server/modules/chat/turn-registry";
import {
  createWorkspaceContentService,
  type WorkspaceContentService,
} from "@/server/modules/workspace-content/workspace-content.service";
import {
  type BackendSettingsService,
  createBackendSettingsService,
  tenantDriverSettings,
} from "@/server/modules/backend-settings/backend-settings.service";
import { ensureInstallationId } from "@/server/modules/installation/installation.data";
import {
  createWorkspaceTerminalService,
  type WorkspaceTerminalService,
} from "@/server/modules/terminal/terminal.service";
import { createTerminalRelay } from "@/server/modules/terminal/terminal-relay";
import { type ChangeFeed, changeFeedSlot, createChangeFeed } from "@/server/modules/live/change-feed";
import { listTenantIdleTtlsBelow } from "@/server/modules/tenant/tenant-policy.data";
import { createProvisionGate } from "@/server/modules/machines/provision-gate";
import { createWorkspaceService, type WorkspaceService } from "@/server/modules/workspace/workspace.service";
import { processLiveness, startHeartbeat } from "@/server/queue/heartbeat";
import { attachTracker } from "@/server/modules/metrics/attach-tracker";
import { createWebhookService, type WebhookService } from "@/server/modules/webhook/webhook.service";
import { disconnectDb } from "@/server/db";
import { closeSharedQueues, getQueues } from "@/server/queue/queues";
import { closeSharedRedis, createRedisConnection, getRedis } from "@/server/redis";
import { processSlot } from "@/server/shared/process-registry";

/**
 * THE composition of the workspace side of a Berth process: config → drivers and engine (with the API's
 * provision gate passed in) → workspace services → agent services (agents, sessions, chat, jobs). Every
 * process kind (`npm start`'s berth-process, `npm run workers`, Next's bundle) gets its instances here, one
 * per process whichever copy of this module asks (server/shared/process-registry.ts).
 */

/** An engine whose cache misses go through the workers (the provision gate over its queues). */
export function composeEngine(options: Omit<CreateEngineOptions, "ensureProvisioned">): WorkspaceEngine {
  const { config, queues, log } = options;
  attachTracker(); // built here, before a composition root seals the process registry
  const ensureProvisioned = createProvisionGate({
    queues,
    waitMs: config.provisionWaitMs,
    log: log.child({ component: "workspace-engine" }),
  });
  // The database's installation id labels every shared-engine resource (reconcile touches only its own);
  // tenants' own backend settings (an E2B team's key, sealed) come from the database too.
  return createEngine({
    installationId: () => ensureInstallationId(),
    tenantSettings: tenantDriverSettings(secretKeyFromBytes(getConfig().secrets.encryptionKey)),
    // Each tenant's own idle TTL (its policy; the installation's caps it) for the cache, as for the sweep.
    tenantIdleTtls: async () =>
      new Map(
        (await listTenantIdleTtlsBelow(config.idleTtlMs)).map(({ tenantId, idleTtlMs }) => [
          tenantId,
          idleTtlMs,
        ]),
      ),
    ...options,
    ensureProvisioned,
  });
}

// One engine per process (one WorkspaceManager, one set of MCP children), whichever copy of this module asks.
const engineSlot = processSlot<WorkspaceEngine>("engine");

/** The process-wide engine, built from the environment on first use (composition roots, routers, workers). */
export function getEngine(): WorkspaceEngine {
  // Every process that has an engine changes workspaces, so it also announces them (API and workers).
  getChangeFeed();
  return engineSlot.get(() =>
    composeEngine({
      config: loadEngineConfig(),
      queues: getQueues(),
      secret: getConfig().secrets.authSecret,
      log: getLogger(),
    }),
  );
}

/** Installs this process' engine (tests, custom composition roots). Call before first use. */
export function setEngine(engine: WorkspaceEngine | undefined): void {
  engineSlot.set(engine);
}

/**
 * Closes the process-wide engine, if one was built: every cached workspace (MCP children, gateway
 * connections), the manager's eviction timer and the drivers. Graceful shutdown of every composition root.
 */
export async function closeEngine(): Promise<void> {
  // Open terminals first: each holds a lease and a shell on a machine the engine is about to let go of.
  const services = workspaceServicesSlot.peek();
  await services?.terminals.closeAll();
  // Then the retries of failed lease releases: what is left goes to the other processes' dead-holder
  // reapers once this process' holder heartbeat is gone (closeAgentServices).
  await services?.service.close();
  workspaceServicesSlot.set(undefined);
  await engineSlot.take()?.close();
  await changeFeedSlot.take()?.close();
}

/**
 * The process' tenant change feed (server/modules/live/change-feed.ts): publishes on the shared producer
 * connection; its subscriber connection opens when a page first listens on this replica.
 */
export function getChangeFeed(): ChangeFeed {
  return changeFeedSlot.get(() => {
    const redisConfig = loadRedisConfig();
    return createChangeFeed({
      redis: getRedis(),
      subscriber: () => createRedisConnection(redisConfig, "worker", "berth-change-feed"),
      prefix: redisConfig.prefix,
    });
  });
}

type Holder = { liveness: Liveness; ttlMs: number; heartbeat: { stop(): Promise<void> } };
const holderSlot = processSlot<Holder>("holder-liveness");

/**
 * This process as a holder of chat turns and workspace leases: an id that beats in the `holders`
 * heartbeat set (WORKERS_HEARTBEAT_TTL_MS, three beats per TTL) from its first use on, and the others'
 * liveness read from the same set. A crashed process stops beating; the others release what it held.
 */
function getHolder(): Holder {
  return holderSlot.get(() => {
    const redisConfig = loadRedisConfig();
    const ttlMs = loadWorkersConfig().heartbeatTtlMs;
    const id = `${os.hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
    const onError = (error: unknown) => getLogger().warn({ err: error }, "holder heartbeat failed");
    const heartbeat = startHeartbeat({
      redis: getRedis(),
      redisPrefix: redisConfig.prefix,
      workerId: id,
      intervalMs: Math.max(300, Math.floor(ttlMs / 3)),
      onError,
      group: "holders",
    });
    heartbeat.ready.catch(onError);
    const liveness: Liveness = {
      ownerId: id,
      classify: (ids) => processLiveness(getRedis(), redisConfig.prefix, "holders", ids, ttlMs),
    };
    return { liveness, ttlMs, heartbeat };
  });
}

type WorkspaceServices = {
  engine: WorkspaceEngine;
  service: WorkspaceService;
  content: WorkspaceContentService;
  terminals: WorkspaceTerminalService;
};
const workspaceServicesSlot = processSlot<WorkspaceServices>("workspace-services");

/** The process-wide workspace service (and its content half) over `getEngine()`: what routers and chat use. */
export function getWorkspaceServices(): {
  service: WorkspaceService;
  content: WorkspaceContentService;
  terminals: WorkspaceTerminalService;
} {
  const engine = getEngine();
  return workspaceServicesSlot.get(
    () => {
      const holderId = getHolder().liveness.ownerId;
      const service = createWorkspaceService(engine, { leaseOwnerId: holderId });
      const redisConfig = loadRedisConfig();
      // Reattaches across replicas: this process owns its terminals under its holder id.
      const relay = createTerminalRelay({
        redis: getRedis(),
        // Bounded retries: a terminal opened while Redis is away works locally instead of waiting.
        subscriber: () => createRedisConnection(redisConfig, "producer", "berth-terminal-relay"),
        prefix: redisConfig.prefix,
        processId: holderId,
      });
      return {
        engine,
        service,
        content: createWorkspaceContentService(service),
        terminals: createWorkspaceTerminalService(
          service,
          { reattachGraceMs: getConfig().http.terminalReattachGraceMs },
          relay,
        ),
      };
    },
    (held) => held.engine === engine,
  );
}

// Once per process (one turn registry, one cancel subscriber), whichever copy of this module asks.
const agentServicesSlot = processSlot<{
  workspaces: WorkspaceService;
  services: AgentServices;
  subscriber: Redis;
}>("agent-services");

/** The process-wide agent services over `getWorkspaceServices()` (rebuilt when a test installs another engine). */
export function getAgentServices(): AgentServices {
  const { service: workspaces } = getWorkspaceServices();
  return agentServicesSlot.get(
    () => {
      const redisConfig = loadRedisConfig();
      const subscriber = createRedisConnection(redisConfig, "worker", "berth-turn-cancel");
      const holder = getHolder();
      const services = createAgentServices({
        workspaces,
        secretKey: secretKeyFromBytes(getConfig().secrets.encryptionKey),
        cancelBus: new RedisCancelBus({ redis: getRedis(), subscriber, prefix: redisConfig.prefix }),
        eventLog: new RedisTurnEventLog({
          redis: getRedis(),
          prefix: redisConfig.prefix,
          onWriteError: (error) =>
            getLogger().warn({ err: error }, "could not store a turn's events for re-attaching"),
        }),
        liveness: holder.liveness,
        reapIntervalMs: Math.max(300, Math.floor(holder.ttlMs / 3)),
      });
      return { workspaces, services, subscriber };
    },
    (held) => held.workspaces === workspaces,
  ).services;
}

/**
 * Closes the cancel-channel subscriber and the dead-holder reaper of the process-wide services, and ends
 * this process' holder heartbeat (graceful shutdown).
 */
export async function closeAgentServices(): Promise<void> {
  const current = agentServicesSlot.take();
  current?.services.close();
  if (current) await current.subscriber.quit().catch(() => current.subscriber.disconnect());
  await holderSlot.take()?.heartbeat.stop();
}

/**
 * Graceful shutdown of everything this module and its neighbours built for the process: the agent
 * services (and the holder heartbeat), the engine, then the queues, the Redis connection and the database
 * client. Each is a no-op for what was never built.
 */
export async function closeProcessComposition(): Promise<void> {
  await closeAgentServices();
  await closeEngine();
  await Promise.all([closeSharedQueues(), closeSharedRedis(), disconnectDb()]);
}

/** Tenants' own backend settings (stateless: built per call from the configuration). */
export function getBackendSettingsService(): BackendSettingsService {
  return createBackendSettingsService({
    secretKey: secretKeyFromBytes(getConfig().secrets.encryptionKey),
    enabledKinds: () => getEngine().drivers.all.map((driver) => driver.kind),
  });
}

/** The tenant side of lifecycle webhooks (stateless: built per call from the configuration). */
export function getWebhookService(): WebhookService {
  const config = getConfig();
  return createWebhookService({
    secretKey: secretKeyFromBytes(config.secrets.encryptionKey),
    policy: { allowedOrigins: config.operations.webhookAllowedOrigins },
  });
}
