import type { SecretKey } from "@/server/auth/secrets";
import type { Db } from "@/server/db";
import type { AttachTracker } from "@/server/modules/metrics/attach-tracker";
import { createAgentService, type AgentService } from "@/server/modules/agent/agent.service";
import { createJobsService, type JobsService } from "@/server/modules/jobs/jobs.service";
import { createSessionService, type SessionService } from "@/server/modules/session/session.service";
import type { WorkspaceService } from "@/server/modules/workspace/workspace.service";
import type { TenantScope } from "@/server/auth/scope";
import { createChatService, type ChatService } from "./chat.service";
import type { TurnEgress } from "./chat-context";
import {
  createCheckpointService,
  type CheckpointService,
} from "@/server/modules/checkpoint/checkpoint.service";
import { createEnqueue } from "@/server/queue/enqueue";
import { checkAgentModel, type TModelCheckResult } from "./model-check";
import { claimTurn, getTurn, heartbeatTurn, interruptTurn } from "./chat-turn.data";
import { startDeadHolderReaper } from "./dead-holders";
import { type CancelBus, type Liveness, TurnRegistry } from "./turn-registry";
import type { TurnEventLog } from "./turn-event-log";
import type { UsageRecorder } from "@/server/modules/metering/metering.service";
import type { AuditRecorder } from "@/server/modules/audit/audit-buffer.service";
import type { LifecycleEvents } from "@/server/modules/webhook/webhook-events";
import type { StageSampleRecorder } from "@/server/modules/metrics/stage-buffer.service";
import { admitTurn, TURN_SLOT_RENEW_MS, type QuotaDeps } from "@/server/modules/quota/quota.service";

/**
 * Composition of the agent-facing services (agents, sessions, chat, jobs) over one workspace service, so
 * routers, chat and team tools share one engine and one turn registry per process.
 */
export type AgentServices = {
  agent: AgentService;
  session: SessionService;
  chat: ChatService;
  jobs: JobsService;
  /** Turn checkpoints: list, diff, revert, fork (server/modules/checkpoint/). */
  checkpoints: CheckpointService;
  /** `agent.testConnection`: checks an agent's model endpoint and key (model-check.ts). */
  checkModel: (scope: TenantScope, agentId: string) => Promise<TModelCheckResult>;
  /** Stops this process' dead-holder reaper (graceful shutdown). */
  close(): void;
};

export function createAgentServices(deps: {
  /** The process' database client (the Berth root's). */
  db: Db;
  workspaces: WorkspaceService;
  secretKey: SecretKey;
  /** Cancel requests between processes (Redis pub/sub). */
  cancelBus: CancelBus;
  /** Each running turn's events, shared by the replicas (Redis streams): re-attaching tabs replay them. */
  eventLog?: TurnEventLog;
  /** This process' holder id and the others' liveness (the `holders` heartbeats). */
  liveness: Liveness;
  /** How often this process looks for turns and leases of dead processes (about a third of their TTL). */
  reapIntervalMs: number;
  turnTtlMs?: number;
  /** Quota admission of turns (the root's, built on first use). */
  quota: () => QuotaDeps;
  /** The root's attach tracker (turns' `first_answer` timings). */
  attachTracker: () => AttachTracker;
  /** Where the services' changes are audited (the root's `berth.audit`). */
  audit: AuditRecorder;
  /** Announces turns' ends to tenants' webhooks (the root's `berth.lifecycle`). */
  lifecycle: LifecycleEvents;
  /** The root's usage buffer (turns are metered once they ran). */
  usage: () => UsageRecorder;
  /** The root's stage buffer (turns' timings). */
  stageSamples: () => StageSampleRecorder;
  /** Each turn's egress grant (server/modules/egress/); without it commands have no network. */
  egress?: TurnEgress;
}): AgentServices {
  const { db } = deps;
  const log = deps.workspaces.engine.log.child({ component: "chat" });
  const onAuditFailure = (error: unknown) => log.error({ err: error }, "audit write failed");
  const turnTtlMs = deps.turnTtlMs ?? 60_000;
  const registry = new TurnRegistry({
    claims: {
      claim: (scope, input) => claimTurn(scope, input, db),
      heartbeat: (turnId, ownerId) => heartbeatTurn(turnId, ownerId, db),
      interrupt: (scope, sessionId, turnId) => interruptTurn(scope, sessionId, turnId, db),
      get: (scope, turnId) => getTurn(scope, turnId, db),
    },
    cancelBus: deps.cancelBus,
    liveness: deps.liveness,
    turnTtlMs,
  });
  const reaper = startDeadHolderReaper({
    db,
    liveness: deps.liveness,
    turnTtlMs,
    isRunningHere: (sessionId) => registry.isRunningHere(sessionId),
    log,
    intervalMs: deps.reapIntervalMs,
  });
  const enqueue = createEnqueue(deps.workspaces.engine.queues);
  const checkpoints = createCheckpointService({
    db,
    store: deps.workspaces.engine.checkpoints,
    enqueueRestore: async (scope, restoreId) => {
      await enqueue("checkpoint.restore", { tenantId: scope.tenantId, restoreId });
    },
    log,
    quota: deps.quota,
    audit: deps.audit,
  });
  const chat = createChatService({
    db,
    workspaces: deps.workspaces,
    registry,
    secretKey: deps.secretKey,
    log,
    ...(deps.eventLog ? { eventLog: deps.eventLog } : {}),
    createSession: (scope, request, extra) => session.create(scope, request, extra),
    checkpoints,
    ...(deps.egress ? { egress: deps.egress } : {}),
    attachTracker: deps.attachTracker,
    stageSamples: deps.stageSamples,
    audit: deps.audit,
    lifecycle: deps.lifecycle,
    quota: {
      admitTurn: (tenantId, turnId) => admitTurn(tenantId, turnId, deps.quota(), db),
      renewEveryMs: TURN_SLOT_RENEW_MS,
      recordUsage: (entries) => deps.usage().record(entries),
    },
  });
  const session = createSessionService({
    db,
    workspaces: deps.workspaces,
    quota: deps.quota,
    audit: deps.audit,
    cancelTurn: (sessionId) => chat.cancelTurn(sessionId),
    onAuditFailure,
  });
  return {
    agent: createAgentService({
      db,
      audit: deps.audit,
      secretKey: deps.secretKey,
      enqueueSessionPurge: (scope, input) => deps.workspaces.enqueueSessionPurge(scope, input),
      enqueueAgentPurge: (scope, input) => deps.workspaces.enqueueAgentPurge(scope, input),
      requestStop: (scope, workspaceId, options) => deps.workspaces.requestStop(scope, workspaceId, options),
      assertBackendChoosable: (kind) => deps.workspaces.backends.assertChoosable(kind),
      onAuditFailure,
    }),
    session,
    chat,
    jobs: createJobsService(deps.workspaces.engine.queues, deps.audit),
    checkpoints,
    checkModel: (scope, agentId) => checkAgentModel(scope, agentId, { secretKey: deps.secretKey }, db),
    close: () => reaper.stop(),
  };
}
