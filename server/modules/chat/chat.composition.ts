import type { Redis } from "ioredis";
import { secretKeyFromBytes, type SecretKey } from "@/server/auth/secrets";
import { getConfig } from "@/server/config/config";
import { loadRedisConfig } from "@/server/config/redis";
import { getWorkspaceServices } from "@/server/engine/engine";
import { createAgentService, type AgentService } from "@/server/modules/agent/agent.service";
import { createJobsService, type JobsService } from "@/server/modules/jobs/jobs.service";
import { createSessionService, type SessionService } from "@/server/modules/session/session.service";
import type { WorkspaceService } from "@/server/modules/workspace/workspace.service";
import { createRedisConnection, getRedis } from "@/server/redis";
import type { TenantScope } from "@/server/auth/scope";
import { processSlot } from "@/server/shared/process-registry";
import { createChatService, type ChatService } from "./chat.service";
import { checkAgentModel, type TModelCheckResult } from "./model-check";
import { RedisTurnLock } from "./redis-turn-lock";
import { TurnRegistry, type TurnLock } from "./turn-registry";

/**
 * Composition of the agent-facing services (agents, sessions, chat, jobs) over one workspace service, so
 * routers, chat and team tools share one engine and one turn registry per process.
 */
export type AgentServices = {
  agent: AgentService;
  session: SessionService;
  chat: ChatService;
  jobs: JobsService;
  /** `agent.testConnection`: checks an agent's model endpoint and key (model-check.ts). */
  checkModel: (scope: TenantScope, agentId: string) => Promise<TModelCheckResult>;
};

export function createAgentServices(deps: {
  workspaces: WorkspaceService;
  secretKey: SecretKey;
  turnLock: TurnLock;
}): AgentServices {
  const log = deps.workspaces.engine.log.child({ component: "chat" });
  const onAuditFailure = (error: unknown) => log.error({ err: error }, "audit write failed");
  const registry = new TurnRegistry({ lock: deps.turnLock });
  const chat = createChatService({
    workspaces: deps.workspaces,
    registry,
    secretKey: deps.secretKey,
    log,
    createSession: (scope, request, extra) => session.create(scope, request, extra),
  });
  const session = createSessionService({
    workspaces: deps.workspaces,
    cancelTurn: (sessionId) => chat.cancelTurn(sessionId),
    onAuditFailure,
  });
  return {
    agent: createAgentService({
      secretKey: deps.secretKey,
      enqueueSessionPurge: (scope, input) => deps.workspaces.enqueueSessionPurge(scope, input),
      enqueueAgentPurge: (scope, input) => deps.workspaces.enqueueAgentPurge(scope, input),
      assertBackendChoosable: (kind) => deps.workspaces.backends.assertChoosable(kind),
      onAuditFailure,
    }),
    session,
    chat,
    jobs: createJobsService(deps.workspaces.engine.queues),
    checkModel: (scope, agentId) => checkAgentModel(scope, agentId, { secretKey: deps.secretKey }),
  };
}

// Once per process (one turn registry, one cancel subscriber), whichever copy of this module asks.
const agentServicesSlot = processSlot<{
  workspaces: WorkspaceService;
  services: AgentServices;
  subscriber: Redis;
}>("agent-services");

/** The process-wide services over `getWorkspaceServices()` (rebuilt when a test installs another engine). */
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
