import type { Db } from "@/server/db";
import type { AttachTracker } from "@/server/modules/metrics/attach-tracker";
import type { StageSampleRecorder } from "@/server/modules/metrics/stage-buffer.service";
import type { z } from "zod";
import type { SecretKey } from "@/server/auth/secrets";
import type { TenantScope } from "@/server/auth/scope";
import type { Logger } from "@/server/logger";
import { audited } from "@/server/modules/audit/audited";
import type { AuditRecorder } from "@/server/modules/audit/audit-buffer.service";
import type { LifecycleEvents } from "@/server/modules/webhook/webhook-events";
import { getSession, listChatMessages } from "@/server/modules/session/session.data";
import { parseInput } from "@/server/shared/parse-input";
import type { TTurnLimitsInput } from "@/server/agent/agent.schema";
import { attachToTurn, followingDeps, followTurns, listTurns } from "./chat-following";
import {
  type ChatContext,
  type ChatWorkspacePort,
  ReadStates,
  type TurnCheckpoints,
  type TurnEgress,
} from "./chat-context";
import { ZChatHistoryRequest, type ZChatSendRequest } from "./chat.schema";
import type { TeamDeps } from "./chat-team";
import type { ZChatAttachRequest } from "./turn-attach";
import { InMemoryTurnEventLog, type TurnEventLog } from "./turn-event-log";
import type { TurnQuotaPort } from "./turn-quota";
import type { TurnRegistry } from "./turn-registry";
import { sendTurn } from "./turn-send";

/**
 * The chat service: `send` runs one turn of a session end to end (admit → claim → workspace under a turn
 * lease → toolkit → model → finish: persisted messages; turn-send.ts, turn-run.ts) and streams its events,
 * which it also stores in the turn's event log (turn-event-log.ts) so `attach` / `follow` can replay and
 * follow it from any tab and any replica (chat-following.ts); `cancel` stops a turn wherever it runs (the
 * only way to: a client going away never does); `history` reads the stored conversation and `turns` each
 * turn's status and reason. Composed per process in chat.composition.ts.
 */
export type ChatServiceDeps = {
  /** The process' database client (the Berth root's). */
  db: Db;
  workspaces: ChatWorkspacePort;
  registry: TurnRegistry;
  secretKey: SecretKey;
  log: Logger;
  limits?: TTurnLimitsInput;
  /** Session creation for team tools (AgentCreate / AgentInvite); without it no team tools are offered. */
  createSession?: TeamDeps["createSession"];
  /** The turn's workspace lease; the engine caps it at its hard maximum. */
  turnLeaseMs?: number;
  /** Quota admission and metering of turns; without it turns are neither limited nor metered (unit tests). */
  quota?: TurnQuotaPort;
  /** Backoff of the final write of a turn (messages + status) when the database fails. */
  finishRetryDelaysMs?: readonly number[];
  /** Each running turn's events for re-attaching tabs (default: this process' memory, not shared). */
  eventLog?: TurnEventLog;
  /** Records each turn's checkpoint of the workdir (none without it: unit tests). */
  checkpoints?: TurnCheckpoints;
  /** Opens each turn's egress grant; without it commands have no network (policy `off` everywhere). */
  egress?: TurnEgress;
  /** The root's attach tracker: a turn's first tool result after a fresh attach is `first_answer`. */
  attachTracker: () => AttachTracker;
  /** The root's stage buffer: each turn's timings. */
  stageSamples: () => StageSampleRecorder;
  /** Where turns and cancels are audited (the root's `berth.audit`). */
  audit: AuditRecorder;
  /** Announces turns' ends to tenants' webhooks (the root's `berth.lifecycle`). */
  lifecycle: LifecycleEvents;
};

export function createChatService(deps: ChatServiceDeps) {
  const { db } = deps;
  const eventLog = deps.eventLog ?? new InMemoryTurnEventLog();
  const ctx: ChatContext = {
    db,
    workspaces: deps.workspaces,
    registry: deps.registry,
    secretKey: deps.secretKey,
    log: deps.log,
    chatLogger: { warn: (facts, message) => deps.log.warn(facts, message) },
    limits: deps.limits,
    createSession: deps.createSession,
    turnLeaseMs: deps.turnLeaseMs ?? 60 * 60_000,
    quota: deps.quota,
    turnEnd: { log: deps.log, retryDelaysMs: deps.finishRetryDelaysMs },
    checkpoints: deps.checkpoints,
    egress: deps.egress,
    attachTracker: deps.attachTracker,
    stageSamples: deps.stageSamples,
    audit: deps.audit,
    lifecycle: deps.lifecycle,
    eventLog,
    attach: followingDeps({ log: eventLog, registry: deps.registry, db }),
    readStates: new ReadStates(),
    send: (scope, input) => sendTurn(ctx, scope, input),
  };
  return {
    send: (
      scope: TenantScope,
      raw: z.input<typeof ZChatSendRequest>,
      options: { signal?: AbortSignal } = {},
    ) => sendTurn(ctx, scope, raw, options),
    cancel: (scope: TenantScope, sessionId: string) => cancelTurn(ctx, scope, sessionId),
    history: (scope: TenantScope, raw: z.input<typeof ZChatHistoryRequest>) => chatHistory(scope, raw, db),
    attach: (scope: TenantScope, raw: z.input<typeof ZChatAttachRequest>, signal?: AbortSignal) =>
      attachToTurn(ctx.attach, scope, raw, signal, db),
    follow: (scope: TenantScope, sessionId: string, signal?: AbortSignal) =>
      followTurns(ctx.attach, scope, sessionId, signal, db),
    turns: (scope: TenantScope, sessionId: string) => listTurns(scope, sessionId, db),
    /** Cancels a session's running turn without a scope (session deletion: the session service's). */
    cancelTurn: (sessionId: string) => deps.registry.cancel(sessionId),
  };
}

export type ChatService = ReturnType<typeof createChatService>;

/** `chat.cancel`: cancels the session's running turn in whichever process runs it (audited). */
async function cancelTurn(
  ctx: ChatContext,
  scope: TenantScope,
  sessionId: string,
): Promise<{ cancelled: boolean }> {
  return audited(
    ctx.audit,
    scope,
    { action: "chat.cancel", targetType: "session", targetId: sessionId },
    async () => {
      const session = await getSession(scope, sessionId, ctx.db);
      return { cancelled: await ctx.registry.cancel(session.id) };
    },
    (error) => ctx.log.warn({ err: error }, "could not audit a chat cancel"),
    (result) => ({ details: { cancelled: result.cancelled } }),
  );
}

/** `chat.history`: the session's stored conversation, a page at a time. */
async function chatHistory(scope: TenantScope, raw: z.input<typeof ZChatHistoryRequest>, db: Db) {
  const input = parseInput(ZChatHistoryRequest, raw);
  const session = await getSession(scope, input.sessionId, db);
  return listChatMessages(
    scope,
    session.id,
    {
      ...(input.limit ? { limit: input.limit } : {}),
      ...(input.afterId ? { afterId: input.afterId } : {}),
    },
    db,
  );
}
