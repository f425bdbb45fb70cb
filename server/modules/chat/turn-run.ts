import type { Db } from "@/server/db";
import { randomUUID } from "node:crypto";
import type { TenantScope } from "@/server/auth/scope";
import { type AgentDTO, defaultSystemPrompt } from "@/server/modules/agent/agent.types";
import { announceChange } from "@/server/modules/live/change-feed";
import { listChatMessages } from "@/server/modules/session/session.data";
import type { ChatMessageDTO, SessionDTO } from "@/server/modules/session/session.types";
import { runTurn, type TurnResult } from "@/server/agent/agent-loop";
import type { TChatTurnEvent } from "@/server/agent/agent.schema";
import { createAgentModel, modelEndpointForAgent } from "@/server/agent/model-provider";
import { safeErrorEvent } from "@/server/agent/safe-errors";
import { fromStoredMessages, type StoredChatMessage } from "@/server/agent/stored-messages";
import { assembleToolkit } from "@/server/agent/toolkit";
import { turnWorkspacePort } from "@/server/agent/workspace-adapters";
import { sessionCommandEnv } from "@/server/workspace/workspace-env";
import type { TurnAdmission } from "@/server/modules/quota/quota.service";
import type { Workspace } from "@/server/workspace/workspace";
import { createChangesTool } from "@/server/agent/changes-tool";
import type { ChatContext, TurnCheckpoints } from "./chat-context";
import { teamToolsFor } from "./chat-team";
import type { TurnOutcome } from "./chat-turn.data";
import { storeTurnEnd, storeUnsavedTurn } from "./turn-end";
import { turnUsage } from "./turn-quota";
import type { RunningTurn } from "./turn-registry";
import { TurnTimer } from "./turn-timer";

/** A claimed turn about to run: what `run` and `finish` work on. */
export type ClaimedTurn = {
  scope: TenantScope;
  session: SessionDTO;
  agent: { agent: AgentDTO; modelApiKey: () => string | null };
  message: string;
  /** Record a BEFORE_TURN checkpoint before the turn runs (`chat.send`'s `checkpointFirst`). */
  checkpointFirst?: boolean;
  turn: RunningTurn;
  /** The turn's quota slot (none without quotas), released when it ends. */
  admission: TurnAdmission | undefined;
  /** When the send arrived (stage timings). */
  requestedAt: number;
};

/** Where a turn's events go: the send's stream and the turn's log (turn-send.ts). */
export type TurnOutlet = {
  publish(event: TChatTurnEvent): void;
  /** Stops what only a running turn needs (keepalives, slot renewals, the listener's abort). */
  stop(): void;
  /** Ends the stream, once the turn has let go of its claim (the session takes a new send then). */
  close(): void;
};

type RunResult = TurnResult & { backend: string; workspaceId: string };

/** What a turn said while it ran, gathered from its events for its stored end. */
type TurnTranscript = { text: string; error: TurnOutcome["error"]; toolCalls: number };

/**
 * Runs a claimed turn to its end, in the background of its `send`: run (workspace, toolkit, model), meter,
 * then finish (store, audit, announce, `done`) and let go of the claim, the slot and the stream. Every event
 * but `done` is published as it happens; `done` only once the turn's messages are stored.
 */
export async function runAndFinish(
  ctx: ChatContext,
  claimed: ClaimedTurn,
  outlet: TurnOutlet,
): Promise<void> {
  const publish = (event: TChatTurnEvent) => outlet.publish(event);
  const { scope, session } = claimed;
  const transcript: TurnTranscript = { text: "", error: null, toolCalls: 0 };
  let result: RunResult | null = null;
  try {
    result = await run(ctx, claimed, (event) => {
      if (event.type === "text-delta") transcript.text += event.text;
      if (event.type === "tool-call") transcript.toolCalls += 1;
      if (event.type === "error")
        transcript.error = { code: event.code, message: event.message, retryable: event.retryable };
      if (event.type !== "done") publish(event);
    });
    // Metered once the model ran, whatever the outcome (buffered: one RPUSH).
    const ran = result;
    await ctx.quota
      ?.recordUsage(turnUsage(scope, session, ran, { toolCalls: transcript.toolCalls, ...ran }))
      .catch((error: unknown) => ctx.log.warn({ err: error }, "could not meter a chat turn"));
  } catch (thrown) {
    // Failures outside the loop (workspace provisioning, storage): reported as the turn's end, typed
    // and masked (a storage failure's text quotes the database; it stays in the log).
    ctx.log.error({ err: thrown, sessionId: session.id }, "chat turn failed outside the agent loop");
    const event = safeErrorEvent(thrown);
    transcript.error = { code: event.code, message: event.message, retryable: event.retryable };
    publish(event);
  }
  await finish(ctx, claimed, doneOf(result, claimed.turn), { transcript, result }, outlet);
}

/** The turn's `done`: the loop's own, or a failed (cancelled) one when it never got to run. */
function doneOf(result: RunResult | null, turn: RunningTurn): Extract<TChatTurnEvent, { type: "done" }> {
  return result
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
}

/**
 * Stores the turn's end (messages, outcome, session status), audits and announces it and publishes `done`;
 * an end that cannot be stored is reported as such. Then lets go of the slot and the claim.
 */
async function finish(
  ctx: ChatContext,
  claimed: ClaimedTurn,
  done: Extract<TChatTurnEvent, { type: "done" }>,
  { transcript, result }: { transcript: TurnTranscript; result: RunResult | null },
  outlet: TurnOutlet,
): Promise<void> {
  const { scope, session, turn } = claimed;
  const publish = (event: TChatTurnEvent) => outlet.publish(event);
  // A turn is a mutation (messages, workspace files): audited once it ends, with its outcome. Never
  // the message text, which may hold secrets.
  const auditTurn = (outcome: "success" | "failure", details: Record<string, unknown>) =>
    ctx.audit
      .record(scope, {
        action: "chat.send",
        targetType: "session",
        targetId: session.id,
        outcome,
        details: { agentId: claimed.agent.agent.id, ...details },
      })
      .catch((error: unknown) => ctx.log.warn({ err: error }, "could not audit a chat turn"));
  const error = transcript.error;
  try {
    await storeTurnEnd(ctx.turnEnd, scope, turn, { done, text: transcript.text, error }, result, ctx.db);
    await auditTurn(done.status === "completed" || done.status === "cancelled" ? "success" : "failure", {
      status: done.status,
      steps: done.steps,
      ...(error ? { code: error.code } : {}),
    });
    announceTurn(ctx, scope.tenantId, session, done.status, error?.code ?? null);
    publish(done);
  } catch (thrown) {
    // The turn ran, but its end could not be stored. The client hears so (typed, masked). Only a lost
    // connection is an outage: the claim goes stale and the session is then shown as interrupted.
    // Anything else is no outage and is not called one; the turn is stored as failed without its reply.
    ctx.log.error({ err: thrown, sessionId: session.id }, "could not store a chat turn's end");
    const unsaved = await storeUnsavedTurn(ctx.turnEnd, scope, turn, claimed.message, done, thrown, ctx.db);
    await auditTurn("failure", { status: "failed", code: unsaved.code });
    announceTurn(ctx, scope.tenantId, session, "failed", unsaved.code);
    publish(unsaved);
    publish({ ...done, status: "failed" });
  } finally {
    outlet.stop();
    await claimed.admission
      ?.release()
      .catch((releaseError: unknown) => ctx.log.warn({ err: releaseError }, "releasing a turn slot failed"));
    await turn.end().catch((endError: unknown) => ctx.log.warn({ err: endError }, "ending a turn failed"));
    outlet.close();
  }
}

/** `turn.completed` / `turn.failed` for the tenant's webhooks (a cancelled turn is neither). */
function announceTurn(
  ctx: Pick<ChatContext, "lifecycle">,
  tenantId: string,
  session: SessionDTO,
  status: string,
  code: string | null,
): void {
  // The sessions list's status column (live pages: server/modules/live/change-feed.ts).
  announceChange(tenantId, { topic: "session", id: session.id, userId: session.userId });
  if (status === "cancelled") return;
  ctx.lifecycle.emit(tenantId, status === "failed" ? "turn.failed" : "turn.completed", {
    sessionId: session.id,
    agentId: session.agentId,
    workspaceId: session.workspaceId,
    code,
  });
}

/** The turn itself, on the workspace, under the lease; events go to `emit` (`done` held back by the caller). */
async function run(
  ctx: ChatContext,
  claimed: ClaimedTurn,
  emit: (event: TChatTurnEvent) => void,
): Promise<RunResult> {
  const { scope, session } = claimed;
  const { agent, modelApiKey } = claimed.agent;
  const sessionId = session.id;
  const agentModel = createAgentModel(modelEndpointForAgent(agent.modelConfig, modelApiKey()));
  const lease = {
    holder: `turn:${randomUUID()}`,
    reason: `chat turn of session ${sessionId}`,
    ttlMs: ctx.turnLeaseMs,
  };
  // The turn's egress grant (policy, secrets) for its commands, closed when the turn ends; policy `off`:
  // nothing added, no network (server/modules/egress/).
  let egress: { env: Record<string, string>; close(): void } | undefined;
  const running = ctx.workspaces.withWorkspaceOfSession(
    scope,
    { session, agent },
    lease,
    async (workspace, record) => {
      const timer = new TurnTimer(
        { tenantId: scope.tenantId, record, requestedAt: claimed.requestedAt },
        ctx.stageSamples(),
      );
      egress = await ctx.egress?.openTurnEgress(scope, {
        agentId: agent.id,
        workspaceId: record.id,
        machine: workspace.machine,
      });
      const port = turnWorkspacePort(workspace, {
        readState: ctx.readStates.of(sessionId),
        acceptedMediaTypes: agent.modelConfig.acceptedMediaTypes ?? [],
        env: { ...sessionCommandEnv(agent.env, session.env), ...egress?.env },
      });
      const toolkit = await assembleToolkit({
        agentId: agent.id,
        sessionId,
        baseSystemPrompt: systemPromptOf(agent),
        workspace: port,
        extraTools: [
          ...(await teamTools(ctx, scope, session)),
          ...(ctx.checkpoints ? [changesTool(ctx.checkpoints, scope, workspace.machine, record)] : []),
        ],
        logger: ctx.chatLogger,
      });
      // Never fail the turn (a checkpoint that cannot be taken is recorded as FAILED).
      const checkpoint = (before: boolean) =>
        ctx.checkpoints?.recordTurn(scope, {
          machine: workspace.machine,
          workspaceId: record.id,
          generation: record.generation,
          sessionId,
          turnId: claimed.turn.turnId,
          before,
          mcpRunning: workspace.runningMcps({ agentId: agent.id, sessionId }),
        });
      if (claimed.checkpointFirst) await checkpoint(true);
      const history = fromStoredMessages(await loadHistory(scope, sessionId, ctx.db));
      const result = await runTurn({
        sessionId,
        model: agentModel.model,
        modelSettings: agentModel.settings,
        system: toolkit.system,
        history,
        userMessage: claimed.message,
        tools: toolkit.tools,
        offloader: port,
        signal: claimed.turn.signal,
        ...(ctx.limits ? { limits: ctx.limits } : {}),
        onEvent: (event) => {
          timer.observe(event);
          if (event.type === "tool-result") ctx.attachTracker().answered(workspace);
          emit(event);
        },
        logger: ctx.chatLogger,
      });
      timer.finish(result.status !== "failed", (error) =>
        ctx.log.warn({ err: error }, "could not buffer turn timings"),
      );
      // The workdir as this turn left it (Bash changes included), still under the turn's lease: nothing
      // else can change it before it is recorded.
      await checkpoint(false);
      return { ...result, backend: record.backendKind, workspaceId: record.id };
    },
  );
  return running.finally(() => egress?.close());
}

/** The agent's own system prompt as written (the description is for people, not the model). */
function systemPromptOf(agent: AgentDTO): string {
  return agent.systemPrompt.trim() || defaultSystemPrompt(agent.name);
}

/** Team tools for a leader session (none without session creation, or for members). */
async function teamTools(ctx: ChatContext, scope: TenantScope, session: SessionDTO) {
  const createSession = ctx.createSession;
  if (!createSession) return [];
  return teamToolsFor(
    {
      db: ctx.db,
      secretKey: ctx.secretKey,
      createSession,
      send: ctx.send,
      cancel: (sessionId) => ctx.registry.cancel(sessionId),
    },
    scope,
    session,
  );
}

/** The session's stored conversation, every page of it, as the model is given it. */
async function loadHistory(scope: TenantScope, sessionId: string, db: Db): Promise<StoredChatMessage[]> {
  const rows: ChatMessageDTO[] = [];
  let afterId: string | undefined;
  for (;;) {
    const page = await listChatMessages(
      scope,
      sessionId,
      { limit: 200, ...(afterId ? { afterId } : {}) },
      db,
    );
    rows.push(...page);
    if (page.length < 200) break;
    afterId = page.at(-1)!.id;
  }
  // What a revert undid stays in the transcript but not in the model's context.
  return rows.filter((row) => !row.reverted).map((row) => ({ role: row.role, content: row.content }));
}

/** The agent's `Changes` tool over the turn's workspace (its checkpoints, and the folder as it is now). */
function changesTool(
  checkpoints: TurnCheckpoints,
  scope: TenantScope,
  machine: Workspace["machine"],
  record: { id: string; generation: number },
) {
  return createChangesTool(async (query) => {
    const { changes, diff } = await checkpoints.workingChanges(
      scope,
      { machine, workspaceId: record.id, generation: record.generation },
      query,
    );
    return {
      changes: changes.map((change) => {
        const entry = change.kind === "removed" ? change.before : change.after;
        return { path: change.path, kind: change.kind, size: entry.type === "file" ? entry.size : null };
      }),
      diff,
    };
  });
}
