import { randomUUID } from "node:crypto";
import { z } from "zod";
import type { SecretKey } from "@/server/auth/secrets";
import type { TenantScope } from "@/server/auth/scope";
import type { Logger } from "@/server/logger";
import { getAgent, getAgentModelApiKey } from "@/server/modules/agent/agent.data";
import { type AgentDTO, defaultSystemPrompt } from "@/server/modules/agent/agent.types";
import { audited } from "@/server/modules/audit/audited";
import { recordAudit } from "@/server/modules/audit/audit-buffer.service";
import {
  appendChatMessages,
  getSession,
  listChatMessages,
  updateSession,
} from "@/server/modules/session/session.data";
import type { ChatMessageDTO, SessionDTO } from "@/server/modules/session/session.types";
import { AppError, clientFacingMessage, isAppError } from "@/server/shared/errors";
import { redactHostPaths } from "@/server/shared/host-paths";
import { parseInput } from "@/server/shared/parse-input";
import { FileReadState } from "@/server/workspace/tools";
import { runTurn, type TurnResult } from "./agent-loop";
import type { TChatTurnEvent, TTurnLimitsInput } from "./chat.schema";
import { teamToolsFor, type TeamDeps } from "./chat-team";
import { EventChannel } from "./event-channel";
import { createAgentModel, modelEndpointForAgent } from "./model-provider";
import type { ChatLogger } from "./ports";
import { fromStoredMessages, toStoredMessage, type StoredChatMessage } from "./stored-messages";
import { assembleToolkit } from "./toolkit";
import type { TurnRegistry } from "./turn-registry";
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
};

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
      const result = await runTurn({
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
        onEvent: emit,
        logger: chatLogger,
      });
      return { ...result, backend: record.backendKind, workspaceId: record.id };
    });
  }

  async function persist(scope: TenantScope, sessionId: string, result: TurnResult): Promise<void> {
    await appendChatMessages(
      scope,
      sessionId,
      result.newMessages.map(toStoredMessage),
      result.compaction
        ? { count: result.compaction.replacedCount, stub: toStoredMessage(result.compaction.stub) }
        : null,
    );
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
      let turn: Awaited<ReturnType<TurnRegistry["start"]>>;
      try {
        turn = await deps.registry.start(session.id);
      } catch (error) {
        await admission?.release();
        throw error;
      }
      const renewal = admission
        ? setInterval(() => void admission.renew().catch(() => undefined), deps.quota!.renewEveryMs)
        : null;
      renewal?.unref();
      const cancelOnAbort = () => void deps.registry.cancel(session.id).catch(() => false);
      options.signal?.addEventListener("abort", cancelOnAbort, { once: true });
      if (options.signal?.aborted) cancelOnAbort(); // aborted while the turn was being claimed
      const channel = new EventChannel<TChatTurnEvent>();
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
      void (async () => {
        let done: TChatTurnEvent | null = null;
        let toolCalls = 0;
        try {
          await updateSession(scope, session.id, { status: "RUNNING" });
          const result = await runOnWorkspace(scope, agent, session, input.message, turn.signal, (event) => {
            if (event.type === "tool-call") toolCalls += 1;
            if (event.type === "done") done = event;
            else channel.push(event);
          });
          // Metered once the model ran, whatever the outcome (buffered: one RPUSH).
          await deps.quota
            ?.recordUsage(turnUsage(scope, session, result, { toolCalls, ...result }))
            .catch((error: unknown) => deps.log.warn({ err: error }, "could not meter a chat turn"));
          await persist(scope, session.id, result);
          await updateSession(scope, session.id, { status: result.status === "failed" ? "ERROR" : "IDLE" });
          await auditTurn(result.status === "failed" ? "failure" : "success", {
            status: result.status,
            steps: result.steps,
            ...(result.error ? { code: result.error.code } : {}),
          });
          if (done) channel.push(done);
        } catch (thrown) {
          // Failures outside the loop (workspace provisioning, storage): reported as the turn's end, typed
          // and masked (a storage failure's text quotes the database; it stays in the log).
          const error = isAppError(thrown)
            ? thrown
            : new AppError("INTERNAL", `chat turn failed: ${String(thrown)}`, {
                cause: thrown,
                userMessage: "Internal error",
              });
          deps.log.error({ err: thrown, sessionId: session.id }, "chat turn failed outside the agent loop");
          await updateSession(scope, session.id, { status: "ERROR" }).catch(() => undefined);
          await auditTurn("failure", { status: "failed", code: error.code });
          channel.push({
            type: "error",
            code: error.code,
            message: redactHostPaths(clientFacingMessage(error)),
            retryable: error.isRetryable,
          });
          channel.push({
            type: "done",
            status: turn.signal.aborted ? "cancelled" : "failed",
            finishReason: null,
            usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0 },
            steps: 0,
          });
        } finally {
          options.signal?.removeEventListener("abort", cancelOnAbort);
          if (renewal) clearInterval(renewal);
          await admission
            ?.release()
            .catch((error: unknown) => deps.log.warn({ err: error }, "releasing a turn slot failed"));
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
