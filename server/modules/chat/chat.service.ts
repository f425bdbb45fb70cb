import { randomUUID } from "node:crypto";
import { z } from "zod";
import type { SecretKey } from "@/server/auth/secrets";
import type { TenantScope } from "@/server/auth/scope";
import type { Logger } from "@/server/logger";
import { getAgent, getAgentModelApiKey } from "@/server/modules/agent/agent.data";
import { type AgentDTO, defaultSystemPrompt } from "@/server/modules/agent/agent.types";
import { audited } from "@/server/modules/audit/audited";
import { recordAudit } from "@/server/modules/audit/audit-buffer.service";
import { getSession, listChatMessages } from "@/server/modules/session/session.data";
import type { ChatMessageDTO, SessionDTO } from "@/server/modules/session/session.types";

import { parseInput } from "@/server/shared/parse-input";
import { FileReadState } from "@/server/workspace/tools";
import { attachTracker } from "@/server/modules/metrics/attach-tracker";
import { emitLifecycleEvent } from "@/server/modules/webhook/webhook-events";
import { runTurn, type TurnResult } from "./agent-loop";
import { finishTurn, type StoredTurn, type TurnOutcome } from "./chat-turn.data";
import { TurnTimer } from "./turn-timer";
import type { TChatTurnEvent, TTurnLimitsInput } from "./chat.schema";
import { teamToolsFor, type TeamDeps } from "./chat-team";
import { EventChannel } from "./event-channel";
import { createAgentModel, modelEndpointForAgent } from "./model-provider";
import type { ChatLogger } from "./ports";
import { safeErrorEvent } from "./safe-errors";
import { fromStoredMessages, toStoredMessage, type StoredChatMessage } from "./stored-messages";
import { assembleToolkit } from "./toolkit";
import type { RunningTurn, TurnRegistry } from "./turn-registry";
import { turnWorkspacePort, type EngineWorkspace } from "./workspace-adapters";
import { turnUsage, type TurnQuotaPort } from "./turn-quota";

/**
 * The chat service: `send` runs one turn of a session end to end (turn lock → workspace under a turn lease →
 * toolkit → model → persisted messages) and streams its events; `cancel` stops a turn wherever it runs;
 * `history` reads the stored conversation. Composed per process in chat.composition.ts.
 */
export const ZChatSendRequest = z.object({
  sessionId: z.string().min(1).max(200),
  message: z.string().min(1).max(200_000),
  /**
   * The client's key of this send (one per message, reused when it sends the same message again after a
   * lost connection): a send with a key the session has seen runs nothing and reports that turn instead.
   */
  idempotencyKey: z
    .string()
    .regex(/^[A-Za-z0-9._:-]{8,128}$/, "8 to 128 letters, digits, '.', '_', ':' or '-'")
    .optional(),
});
export const ZChatHistoryRequest = z.object({
  sessionId: z.string().min(1).max(200),
  limit: z.number().int().min(1).max(200).optional(),
  afterId: z.string().min(1).max(200).optional(),
});

type ChatWorkspacePort = {
  /** Runs `fn` on the session's (provisioned, attached) workspace under a lease: H8's workspace service. */
  withSessionWorkspace<T>(
    scope: TenantScope,
    sessionId: string,
    lease: { holder: string; reason: string; ttlMs?: number },
    fn: (workspace: EngineWorkspace, record: { id: string; backendKind: string }) => Promise<T>,
  ): Promise<T>;
};

export type ChatServiceDeps = {
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
};

/** A `keepalive` event on a quiet stream every this often (chat.schema.ts). */
const KEEPALIVE_MS = 15_000;

function keepAlive(channel: EventChannel<TChatTurnEvent>): NodeJS.Timeout {
  const timer = setInterval(() => {
    if (channel.idleMs() >= KEEPALIVE_MS) channel.push({ type: "keepalive" });
  }, KEEPALIVE_MS / 3);
  timer.unref();
  return timer;
}

/** `turn.completed` / `turn.failed` for the tenant's webhooks (a cancelled turn is neither). */
function announceTurn(tenantId: string, session: SessionDTO, status: string, code: string | null): void {
  if (status === "cancelled") return;
  emitLifecycleEvent(tenantId, status === "failed" ? "turn.failed" : "turn.completed", {
    sessionId: session.id,
    agentId: session.agentId,
    workspaceId: session.workspaceId,
    code,
  });
}

/** Read-before-Write bookkeeping survives between a session's turns (bounded: oldest sessions dropped). */
const MAX_READ_STATES = 1_000;

export function createChatService(deps: ChatServiceDeps) {
  const readStates = new Map<string, FileReadState>();
  const chatLogger: ChatLogger = { warn: (facts, message) => deps.log.warn(facts, message) };

  function readStateFor(sessionId: string): FileReadState {
    let state = readStates.get(sessionId);
    if (state) {
      readStates.delete(sessionId);
    } else {
      state = new FileReadState();
      if (readStates.size >= MAX_READ_STATES) readStates.delete(readStates.keys().next().value!);
    }
    readStates.set(sessionId, state);
    return state;
  }

  async function loadHistory(scope: TenantScope, sessionId: string): Promise<StoredChatMessage[]> {
    const rows: ChatMessageDTO[] = [];
    let afterId: string | undefined;
    for (;;) {
      const page = await listChatMessages(scope, sessionId, { limit: 200, ...(afterId ? { afterId } : {}) });
      rows.push(...page);
      if (page.length < 200) break;
      afterId = page.at(-1)!.id;
    }
    return rows.map((row) => ({ role: row.role, content: row.content }));
  }

  /** The agent's own system prompt as written (the description is for people, not the model). */
  function systemPromptOf(agent: AgentDTO): string {
    return agent.systemPrompt.trim() || defaultSystemPrompt(agent.name);
  }

  /** The turn itself, on the workspace, under the lease; events go to `emit` (`done` held back by the caller). */
  async function runOnWorkspace(
    scope: TenantScope,
    agent: AgentDTO,
    session: SessionDTO,
    message: string,
    signal: AbortSignal,
    emit: (event: TChatTurnEvent) => void,
    requestedAt: number,
  ): Promise<TurnResult & { backend: string; workspaceId: string }> {
    const sessionId = session.id;
    const apiKey = await getAgentModelApiKey(scope, agent.id, deps.secretKey);
    const agentModel = createAgentModel(modelEndpointForAgent(agent.modelConfig, apiKey));
    const lease = {
      holder: `turn:${randomUUID()}`,
      reason: `chat turn of session ${sessionId}`,
      ttlMs: deps.turnLeaseMs ?? 60 * 60_000,
    };
    return deps.workspaces.withSessionWorkspace(scope, sessionId, lease, async (workspace, record) => {
      const timer = new TurnTimer({ tenantId: scope.tenantId, record, requestedAt });
      const port = turnWorkspacePort(workspace, {
        readState: readStateFor(sessionId),
        acceptedMediaTypes: agent.modelConfig.acceptedMediaTypes ?? [],
      });
      const toolkit = await assembleToolkit({
        agentId: agent.id,
        sessionId,
        baseSystemPrompt: systemPromptOf(agent),
        workspace: port,
        extraTools: await teamTools(scope, session),
        logger: chatLogger,
      });
      const history = fromStoredMessages(await loadHistory(scope, sessionId));
      return runTurn({
        sessionId,
        model: agentModel.model,
        modelSettings: agentModel.settings,
        system: toolkit.system,
        history,
        userMessage: message,
        tools: toolkit.tools,
        offloader: port,
        signal,
        ...(deps.limits ? { limits: deps.limits } : {}),
        onEvent: (event) => {
          timer.observe(event);
          if (event.type === "tool-result") attachTracker().answered(workspace);
          emit(event);
        },
        logger: chatLogger,
      }).then((result) => {
        timer.finish(result.status !== "failed", (error) =>
          deps.log.warn({ err: error }, "could not buffer turn timings"),
        );
        return { ...result, backend: record.backendKind, workspaceId: record.id };
      });
    });
  }

  /**
   * Stores the turn's end (outcome, messages, session status) in one transaction, retried with backoff
   * so a short database outage does not lose what ran. When it still fails the claim is left to go stale:
   * another process then records the turn as interrupted (the user's message and the marker).
   */
  async function finish(
    scope: TenantScope,
    turn: RunningTurn,
    outcome: TurnOutcome,
    result: TurnResult | null,
  ): Promise<void> {
    const sessionStatus = outcome.done.status === "failed" ? "ERROR" : "IDLE";
    const messages = result ? result.newMessages.map(toStoredMessage) : [];
    const compaction = result?.compaction
      ? { count: result.compaction.replacedCount, stub: toStoredMessage(result.compaction.stub) }
      : null;
    const delays = deps.finishRetryDelaysMs ?? [250, 1_000, 2_000, 4_000, 8_000];
    for (let attempt = 0; ; attempt++) {
      try {
        await finishTurn(scope, turn.sessionId, turn.turnId, {
          outcome,
          messages,
          compaction,
          sessionStatus,
        });
        return;
      } catch (error) {
        const delay = delays[attempt];
        if (delay === undefined) throw error;
        deps.log.warn(
          { err: error, sessionId: turn.sessionId, attempt },
          "storing a turn's end failed; retrying",
        );
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }

  /** The stream of a send whose key the session has seen: that turn's outcome (awaited while it runs). */
  function replay(scope: TenantScope, turn: StoredTurn, signal: AbortSignal | undefined) {
    const channel = new EventChannel<TChatTurnEvent>();
    const keepalive = keepAlive(channel);
    void (async () => {
      try {
        const ended = await deps.registry.awaitOutcome(scope, turn, signal);
        const outcome = ended?.outcome;
        if (!outcome) return;
        if (outcome.error) channel.push({ type: "error", ...outcome.error });
        if (outcome.text !== "") channel.push({ type: "text-delta", text: outcome.text });
        channel.push(outcome.done);
      } catch (thrown) {
        deps.log.error({ err: thrown, sessionId: turn.sessionId }, "reporting a turn's outcome failed");
        channel.push(safeErrorEvent(thrown));
      } finally {
        clearInterval(keepalive);
        channel.close();
      }
    })();
    return channel;
  }

  async function teamTools(scope: TenantScope, session: SessionDTO) {
    const createSession = deps.createSession;
    if (!createSession) return [];
    return teamToolsFor(
      {
        secretKey: deps.secretKey,
        createSession,
        send: (memberScope, input) => service.send(memberScope, input),
        cancel: (sessionId) => deps.registry.cancel(sessionId),
      },
      scope,
      session,
    );
  }

  const service = {
    /**
     * Starts one turn and returns its event stream. Rejects at once (before any event) with NOT_FOUND for a
     * session of another tenant and CONFLICT while the session has a running turn in any process. Leaving the
     * iteration early does NOT cancel the turn (use `cancel`, or pass `signal`): it finishes and is persisted.
     * `options.signal` (the HTTP request's, over the API) cancels the turn when it aborts before the turn
     * ends: one turn per request, so a client that aborts or disconnects does not leave a turn running. The
     * final `done` event is sent only after the turn's messages are stored, so `history` right after `done`
     * includes them.
     */
    async send(
      scope: TenantScope,
      raw: z.input<typeof ZChatSendRequest>,
      options: { signal?: AbortSignal } = {},
    ): Promise<AsyncIterable<TChatTurnEvent>> {
      const input = parseInput(ZChatSendRequest, raw);
      const session = await getSession(scope, input.sessionId);
      const agent = await getAgent(scope, session.agentId);
      options.signal?.throwIfAborted();
      // Before the session is claimed or any workspace touched: the budget's hard stop and one of the
      // tenant's concurrent-turn slots (QUOTA_EXCEEDED names the limit), held until the turn ends.
      const admission = await deps.quota?.admitTurn(scope.tenantId, randomUUID());
      const started = await deps.registry
        .start(scope, {
          sessionId: session.id,
          idempotencyKey: input.idempotencyKey ?? null,
          userMessage: input.message,
        })
        .catch(async (error: unknown) => {
          await admission?.release();
          throw error;
        });
      // The same send again (a client that lost its connection): report that turn, never run it twice.
      if (started.kind === "existing") {
        await admission?.release();
        return replay(scope, started.turn, options.signal);
      }
      const turn = started.turn;
      const renewal = admission
        ? setInterval(() => void admission.renew().catch(() => undefined), deps.quota!.renewEveryMs)
        : null;
      renewal?.unref();
      const cancelOnAbort = () => void deps.registry.cancel(session.id).catch(() => false);
      options.signal?.addEventListener("abort", cancelOnAbort, { once: true });
      if (options.signal?.aborted) cancelOnAbort(); // aborted while the turn was being claimed
      const channel = new EventChannel<TChatTurnEvent>();
      const keepalive = keepAlive(channel);
      // A turn is a mutation (messages, workspace files): audited once it ends, with its outcome. Never
      // the message text, which may hold secrets.
      const auditTurn = (outcome: "success" | "failure", details: Record<string, unknown>) =>
        recordAudit(scope, {
          action: "chat.send",
          targetType: "session",
          targetId: session.id,
          outcome,
          details: { agentId: agent.id, ...details },
        }).catch((error: unknown) => deps.log.warn({ err: error }, "could not audit a chat turn"));
      const requestedAt = Date.now();
      void (async () => {
        let text = "";
        let errorEvent: TurnOutcome["error"] = null;
        let result: Awaited<ReturnType<typeof runOnWorkspace>> | null = null;
        let toolCalls = 0;
        try {
          result = await runOnWorkspace(
            scope,
            agent,
            session,
            input.message,
            turn.signal,
            (event) => {
              if (event.type === "text-delta") text += event.text;
              if (event.type === "tool-call") toolCalls += 1;
              if (event.type === "error")
                errorEvent = { code: event.code, message: event.message, retryable: event.retryable };
              if (event.type !== "done") channel.push(event);
            },
            requestedAt,
          );
          // Metered once the model ran, whatever the outcome (buffered: one RPUSH).
          const ran = result;
          await deps.quota
            ?.recordUsage(turnUsage(scope, session, ran, { toolCalls, ...ran }))
            .catch((error: unknown) => deps.log.warn({ err: error }, "could not meter a chat turn"));
        } catch (thrown) {
          // Failures outside the loop (workspace provisioning, storage): reported as the turn's end, typed
          // and masked (a storage failure's text quotes the database; it stays in the log).
          deps.log.error({ err: thrown, sessionId: session.id }, "chat turn failed outside the agent loop");
          const event = safeErrorEvent(thrown);
          errorEvent = { code: event.code, message: event.message, retryable: event.retryable };
          channel.push(event);
        }
        const done: Extract<TChatTurnEvent, { type: "done" }> = result
          ? {
              type: "done",
              status: result.status,
              finishReason: result.finishReason,
              usage: result.usage,
              steps: result.steps,
            }
          : {
              type: "done",
              status: turn.signal.aborted ? "cancelled" : "failed",
              finishReason: null,
              usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0 },
              steps: 0,
            };
        try {
          await finish(scope, turn, { done, text, error: errorEvent }, result);
          await auditTurn(
            done.status === "completed" || done.status === "cancelled" ? "success" : "failure",
            {
              status: done.status,
              steps: done.steps,
              ...(errorEvent ? { code: errorEvent.code } : {}),
            },
          );
          announceTurn(scope.tenantId, session, done.status, errorEvent?.code ?? null);
          channel.push(done);
        } catch (thrown) {
          // The database stayed unreachable: the turn ran, but its end could not be stored. The client hears
          // so (typed, masked); the claim goes stale and the session is then shown as interrupted.
          deps.log.error({ err: thrown, sessionId: session.id }, "could not store a chat turn's end");
          await auditTurn("failure", { status: "failed", code: "UNAVAILABLE" });
          announceTurn(scope.tenantId, session, "failed", "UNAVAILABLE");
          channel.push({
            type: "error",
            code: "UNAVAILABLE",
            message:
              "The reply could not be saved because the database is unavailable. Reload the session later.",
            retryable: false,
          });
          channel.push({ ...done, status: "failed" });
        } finally {
          clearInterval(keepalive);
          if (renewal) clearInterval(renewal);
          await admission
            ?.release()
            .catch((error: unknown) => deps.log.warn({ err: error }, "releasing a turn slot failed"));
          options.signal?.removeEventListener("abort", cancelOnAbort);
          await turn.end().catch((error: unknown) => deps.log.warn({ err: error }, "ending a turn failed"));
          channel.close();
        }
      })();
      return channel;
    },

    /** Cancels the session's running turn in whichever process runs it. */
    async cancel(scope: TenantScope, sessionId: string): Promise<{ cancelled: boolean }> {
      return audited(
        scope,
        { action: "chat.cancel", targetType: "session", targetId: sessionId },
        async () => {
          const session = await getSession(scope, sessionId);
          return { cancelled: await deps.registry.cancel(session.id) };
        },
        (error) => deps.log.warn({ err: error }, "could not audit a chat cancel"),
        (result) => ({ details: { cancelled: result.cancelled } }),
      );
    },

    async history(scope: TenantScope, raw: z.input<typeof ZChatHistoryRequest>) {
      const input = parseInput(ZChatHistoryRequest, raw);
      const session = await getSession(scope, input.sessionId);
      return listChatMessages(scope, session.id, {
        ...(input.limit ? { limit: input.limit } : {}),
        ...(input.afterId ? { afterId: input.afterId } : {}),
      });
    },

    cancelTurn: (sessionId: string) => deps.registry.cancel(sessionId),
  };
  return service;
}

export type ChatService = ReturnType<typeof createChatService>;
