import type { Redis } from "ioredis";
import { secretKeyFromBytes } from "@/server/auth/secrets";
import { getConfig } from "@/server/config/config";
import { loadRedisConfig } from "@/server/config/redis";
import { createEngine, type CreateEngineOptions, type WorkspaceEngine } from "@/server/engine/engine";
import { loadEngineConfig } from "@/server/engine/engine-config";
import { getLogger } from "@/server/logger";
import { createAgentServices, type AgentServices } from "@/server/modules/chat/chat.composition";
import { RedisTurnLock } from "@/server/modules/chat/redis-turn-lock";
import {
  createWorkspaceContentService,
  type WorkspaceContentService,
} from "@/server/modules/workspace/workspace-content.service";
import { attachTracker } from "@/server/modules/metrics/attach-tracker";
import { createProvisionGate } from "@/server/modules/workspace/workspace-provisioning";
import { createWorkspaceService, type WorkspaceService } from "@/server/modules/workspace/workspace.service";
import { createWebhookService, type WebhookService } from "@/server/modules/webhook/webhook.service";
import { getQueues } from "@/server/queue/queues";
import { createRedisConnection, getRedis } from "@/server/redis";
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
  return createEngine({ ...options, ensureProvisioned });
}

// One engine per process (one WorkspaceManager, one set of MCP children), whichever copy of this module asks.
const engineSlot = processSlot<WorkspaceEngine>("engine");

/** The process-wide engine, built from the environment on first use (composition roots, routers, workers). */
export function getEngine(): WorkspaceEngine {
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
  workspaceServicesSlot.set(undefined);
  await engineSlot.take()?.close();
}

type WorkspaceServices = {
  engine: WorkspaceEngine;
  service: WorkspaceService;
  content: WorkspaceContentService;
};
const workspaceServicesSlot = processSlot<WorkspaceServices>("workspace-services");

/** The process-wide workspace service (and its content half) over `getEngine()`: what routers and chat use. */
export function getWorkspaceServices(): { service: WorkspaceService; content: WorkspaceContentService } {
  const engine = getEngine();
  return workspaceServicesSlot.get(
    () => {
      const service = createWorkspaceService(engine);
      return { engine, service, content: createWorkspaceContentService(service) };
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
      const turnLock = new RedisTurnLock({ redis: getRedis(), subscriber, prefix: redisConfig.prefix });
      const services = createAgentServices({
        workspaces,
        secretKey: secretKeyFromBytes(getConfig().secrets.encryptionKey),
        turnLock,
      });
      return { workspaces, services, subscriber };
    },
    (held) => held.workspaces === workspaces,
  ).services;
}

/** Closes the cancel-channel subscriber of the process-wide services (graceful shutdown). */
export async function closeAgentServices(): Promise<void> {
  const current = agentServicesSlot.take();
  if (current) await current.subscriber.quit().catch(() => current.subscriber.disconnect());
}

/** The tenant side of lifecycle webhooks (stateless: built per call from the configuration). */
export function getWebhookService(): WebhookService {
  const config = getConfig();
  return createWebhookService({
    secretKey: secretKeyFromBytes(config.secrets.encryptionKey),
    policy: { allowedOrigins: config.operations.webhookAllowedOrigins },
  });
}
