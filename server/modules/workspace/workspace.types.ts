import { z } from "zod";
import { type IsolationPolicy, ZBackendKind, ZIsolationPolicy } from "@/server/modules/agent/agent.types";

export const WORKSPACE_STATES = [
  "PENDING",
  "PROVISIONING",
  "READY",
  "STOPPING",
  "STOPPED",
  "PURGING",
  "PURGED",
  "FAILED",
] as const;
export const ZWorkspaceState = z.enum(WORKSPACE_STATES);
export type WorkspaceState = z.infer<typeof ZWorkspaceState>;
export type BackendKind = z.infer<typeof ZBackendKind>;

/**
 * The workspace lifecycle. PENDING → PROVISIONING → READY → STOPPING → STOPPED, and a stopped
 * workspace is resumed by provisioning again. Any non-final state may fail; a failed workspace may be
 * retried, stopped or purged. A purge claims the workspace first (→ PURGING, which nothing provisions,
 * stops or sweeps), deletes the machine and data, then ends the generation (→ PURGED). PURGED is not
 * final: the next use provisions the same id again as generation + 1, fresh and empty
 * (PURGED → PROVISIONING, the only transition that bumps `generation`).
 */
export const WORKSPACE_TRANSITIONS: Record<WorkspaceState, readonly WorkspaceState[]> = {
  PENDING: ["PROVISIONING", "FAILED", "PURGING"],
  PROVISIONING: ["READY", "FAILED", "STOPPING", "PURGING"],
  READY: ["STOPPING", "FAILED", "PURGING"],
  STOPPING: ["STOPPED", "FAILED", "PURGING"],
  STOPPED: ["PROVISIONING", "PURGING", "FAILED"],
  FAILED: ["PROVISIONING", "STOPPING", "PURGING"],
  PURGING: ["PURGED"],
  PURGED: ["PROVISIONING"],
};

export function canTransitionWorkspace(from: WorkspaceState, to: WorkspaceState): boolean {
  return WORKSPACE_TRANSITIONS[from].includes(to);
}

const WORKSPACE_EVENT_KINDS = [
  "created",
  "provisioning",
  "provisioned",
  "bumped",
  "stopping",
  "stopped",
  "purging",
  "purged",
  "failed",
  "lease_acquired",
  "lease_released",
  "data_lost",
  "integrity_checked",
] as const;
export const ZWorkspaceEventKind = z.enum(WORKSPACE_EVENT_KINDS);
export type WorkspaceEventKind = z.infer<typeof ZWorkspaceEventKind>;

/** The ledger entries that are state changes: the newest one says why the workspace is in its state. */
export const TRANSITION_EVENT_KINDS = [
  "provisioning",
  "provisioned",
  "stopping",
  "stopped",
  "purging",
  "purged",
  "failed",
] as const satisfies readonly WorkspaceEventKind[];

export const ZUpsertWorkspaceInput = z.object({
  id: z.string().min(1).max(200),
  backendKind: ZBackendKind,
  isolationPolicy: ZIsolationPolicy,
  agentId: z.string().nullish(),
  userId: z.string().nullish(),
});
export type TUpsertWorkspaceInput = z.input<typeof ZUpsertWorkspaceInput>;

export type WorkspaceDTO = {
  id: string;
  backendKind: BackendKind;
  isolationPolicy: IsolationPolicy;
  agentId: string | null;
  userId: string | null;
  state: WorkspaceState;
  /** 1 for a new id; each purge ends one and the next use starts the next (fresh, empty). A positive integer. */
  generation: number;
  backendHandle: unknown;
  lastActivityAt: Date | null;
  stateChangedAt: Date;
  error: string | null;
  /** The name people gave it on the dashboard (null: none). */
  label: string | null;
  activeLeases: number;
  createdAt: Date;
  updatedAt: Date;
};

export type WorkspaceEventDTO = {
  id: string;
  workspaceId: string;
  kind: WorkspaceEventKind;
  reason: string | null;
  actor: string;
  data: unknown;
  at: Date;
};

export type WorkspaceLeaseDTO = {
  id: string;
  workspaceId: string;
  holder: string;
  reason: string | null;
  expiresAt: Date | null;
  createdAt: Date;
};
