import type { Db } from "@/server/db";
import type { AttachTracker } from "@/server/modules/metrics/attach-tracker";
import type { StageSampleRecorder } from "@/server/modules/metrics/stage-buffer.service";
import type { AuditRecorder } from "@/server/modules/audit/audit-buffer.service";
import type { LifecycleEvents } from "@/server/modules/webhook/webhook-events";
import type { SecretKey } from "@/server/auth/secrets";
import type { TenantScope } from "@/server/auth/scope";
import type { Logger } from "@/server/logger";
import type { AgentDTO } from "@/server/modules/agent/agent.types";
import type { SessionDTO } from "@/server/modules/session/session.types";
import { FileReadState } from "@/server/workspace/tools";
import type { TTurnLimitsInput } from "@/server/agent/agent.schema";
import type { ChatLogger } from "@/server/agent/ports";
import type { EngineWorkspace } from "@/server/agent/workspace-adapters";
import type { TeamDeps } from "./chat-team";
import type { TurnAttachDeps } from "./turn-attach";
import type { TurnEventLog } from "./turn-event-log";
import type { TurnQuotaPort } from "./turn-quota";
import type { TurnRegistry } from "./turn-registry";
import type { CheckpointService } from "@/server/modules/checkpoint/checkpoint.service";
import type { EgressService } from "@/server/modules/egress/egress.service";

/** What a turn records at its end: its workspace's checkpoint (server/modules/checkpoint/). */
export type TurnCheckpoints = Pick<CheckpointService, "recordTurn" | "workingChanges">;
type CheckpointMachine = Parameters<TurnCheckpoints["recordTurn"]>[1]["machine"];

/**
 * A turn's egress (server/modules/egress/egress.service.ts): the grant its commands carry (env) while the
 * turn runs; closed at its end. No grant (policy `off`): empty env, no network.
 */
export type TurnEgress = Pick<EgressService, "openTurnEgress">;

/** What the chat service needs of the workspace service (workspace.service.ts). */
export type ChatWorkspacePort = {
  /**
   * Runs `fn` on the session's (provisioned, attached) workspace under a lease, with the session and agent
   * the turn read (the workspace service reads neither again; its lease lock is the workspace's one read).
   */
  withWorkspaceOfSession<T>(
    scope: TenantScope,
    of: { session: SessionDTO; agent: AgentDTO },
    lease: { holder: string; reason: string; ttlMs?: number },
    fn: (
      workspace: EngineWorkspace & { readonly machine: CheckpointMachine },
      record: { id: string; backendKind: string; generation: number },
    ) => Promise<T>,
  ): Promise<T>;
};

/**
 * What every use case of the chat service works with, built once per service (chat.service.ts) and passed
 * to each of them explicitly.
 */
export type ChatContext = {
  /** The process' database client (the Berth root's). */
  db: Db;
  workspaces: ChatWorkspacePort;
  registry: TurnRegistry;
  secretKey: SecretKey;
  log: Logger;
  chatLogger: ChatLogger;
  limits: TTurnLimitsInput | undefined;
  /** Session creation for team tools (AgentCreate / AgentInvite); without it no team tools are offered. */
  createSession: TeamDeps["createSession"] | undefined;
  turnLeaseMs: number;
  quota: TurnQuotaPort | undefined;
  turnEnd: { log: Logger; retryDelaysMs: readonly number[] | undefined };
  checkpoints: TurnCheckpoints | undefined;
  egress: TurnEgress | undefined;
  /** The root's attach tracker (stage timings: `first_answer`). */
  attachTracker: () => AttachTracker;
  /** The root's stage buffer (a turn's `queue_wait`, `tool` and `model` timings). */
  stageSamples: () => StageSampleRecorder;
  /** Where turns and cancels are audited (the root's `berth.audit`). */
  audit: AuditRecorder;
  /** Announces `turn.completed` / `turn.failed` (the root's `berth.lifecycle`). */
  lifecycle: LifecycleEvents;
  eventLog: TurnEventLog;
  /** How turns are seen again from their logs (chat-following.ts). */
  attach: TurnAttachDeps;
  readStates: ReadStates;
  /** The service's own `send`: a team leader's tools run their members' turns through it. */
  send: TeamDeps["send"];
};

/** Read-before-Write bookkeeping survives between a session's turns (bounded: oldest sessions dropped). */
const MAX_READ_STATES = 1_000;

/** The Read tool's bookkeeping per session, kept between its turns (least recently used dropped first). */
export class ReadStates {
  private readonly states = new Map<string, FileReadState>();

  of(sessionId: string): FileReadState {
    let state = this.states.get(sessionId);
    if (state) {
      this.states.delete(sessionId);
    } else {
      state = new FileReadState();
      if (this.states.size >= MAX_READ_STATES) this.states.delete(this.states.keys().next().value!);
    }
    this.states.set(sessionId, state);
    return state;
  }
}
