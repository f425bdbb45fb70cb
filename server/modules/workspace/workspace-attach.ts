import type { TenantScope } from "@/server/auth/scope";
import type { Db, DbClient } from "@/server/db";
import type { WorkspaceEngine } from "@/server/engine/engine";
import { getAgentOrNull } from "@/server/modules/agent/agent.data";
import { type AgentDTO, ZAgentDefaultMcps, ZAgentDefaultSkills } from "@/server/modules/agent/agent.types";
import type { AttachTracker } from "@/server/modules/metrics/attach-tracker";
import { AppError } from "@/server/shared/errors";
import type { Workspace } from "@/server/workspace/workspace";
import { attachWithRecordRead } from "@/server/modules/machines/provision-gate";
import { getWorkspaceOrNull } from "./workspace.data";
import type { WorkspaceRecord } from "./workspace-lifecycle.data";
import { addressOfRecord } from "./workspace-spec";
import type { WorkspaceDTO } from "./workspace.types";

/** What attaching needs: the process' engine and its single flights (one per process, see the factory). */
export type AttachDeps = {
  engine: WorkspaceEngine;
  /** The API half of the stage timings (the root's tracker, built on first use). */
  attachTracker: () => AttachTracker;
  /** The process' database client (the Berth root's). */
  db: Db;
  /** One read per agent at a time, however many calls use its workspaces at once. */
  agentReads: Map<string, ReturnType<typeof getAgentOrNull>>;
  /** One read of the record's generation per freshly attached handle. */
  generationReads: WeakMap<Workspace, Promise<number>>;
};

export function createAttachDeps(
  engine: WorkspaceEngine,
  attachTracker: () => AttachTracker,
  db: Db,
): AttachDeps {
  return { engine, attachTracker, db, agentReads: new Map(), generationReads: new WeakMap() };
}

/** What attaching needs of a record (a WorkspaceDTO or the lease lock's WorkspaceRecord). */
type AttachableRecord = Pick<
  WorkspaceDTO,
  "id" | "state" | "stateChangedAt" | "generation" | "agentId" | "userId" | "backendKind"
>;

/** The stored defaults of an agent (read by the caller, or here). */
type AgentDefaults = Pick<AgentDTO, "id" | "defaultMcpConfigs" | "defaultSkills">;

/** The workspace record, or NOT_FOUND. */
export async function requireWorkspaceRecord(
  scope: TenantScope,
  workspaceId: string,
  db: DbClient,
): Promise<WorkspaceDTO> {
  const record = await getWorkspaceOrNull(scope, workspaceId, db);
  if (!record) {
    throw new AppError("NOT_FOUND", `workspace ${workspaceId} not found`, {
      userMessage: "Workspace not found.",
    });
  }
  return record;
}

/**
 * Attaches through the manager (a PURGED record is provisioned again as its next generation by the
 * workers). A cached handle is evicted when it is stale: attached to an earlier generation (a purge came
 * and went), or older than the record's last state change while the record is not READY.
 */
export async function attachWorkspace(
  deps: Pick<AttachDeps, "engine" | "attachTracker" | "db" | "generationReads">,
  scope: TenantScope,
  record: AttachableRecord,
  /** The record as just read under the lease lock: the provision gate starts from it (no read of its own). */
  recordRead?: WorkspaceRecord,
): Promise<Workspace> {
  const { engine } = deps;
  const address = addressOfRecord({ ...record, tenantId: scope.tenantId });
  const cached = engine.manager.peek(address);
  if (cached) {
    const cachedGeneration = engine.generationOf(cached);
    const stale =
      record.state !== "READY"
        ? record.stateChangedAt.getTime() >= (engine.attachedAt(cached) ?? 0)
        : cachedGeneration !== undefined && cachedGeneration !== record.generation;
    if (stale) await engine.manager.close(address);
  }
  const requestedAt = Date.now();
  const getWorkspace = () =>
    engine.manager.getWorkspace({
      tenantId: address.tenantId,
      userId: address.userId,
      agentId: record.agentId ?? "",
      workspaceId: record.id,
    });
  const { value: workspace, provisioned } = recordRead
    ? await attachWithRecordRead(recordRead, getWorkspace)
    : { value: await getWorkspace(), provisioned: null };
  const attachedAt = engine.attachedAt(workspace);
  if (attachedAt !== undefined && attachedAt >= requestedAt) {
    // This call (or one racing it) attached: the stage timings get `attach` and, later, `first_answer`.
    deps.attachTracker().attached(workspace, {
      tenantId: scope.tenantId,
      workspaceId: record.id,
      backend: record.backendKind,
      requestedAt,
      attachedAt,
    });
  }
  if (engine.generationOf(workspace) === undefined) {
    // READY before the attach: nothing was provisioned in between. Otherwise the workers just made it
    // READY, possibly as a new generation: ask the record which one this handle belongs to (once per
    // handle, however many calls attached to it at the same time).
    if (record.state === "READY") engine.tagGeneration(workspace, record.generation);
    // The gate read the record once the workers were done: its generation is this handle's.
    else if (provisioned) engine.tagGeneration(workspace, provisioned.generation);
    else {
      let reading = deps.generationReads.get(workspace);
      if (!reading) {
        reading = requireWorkspaceRecord(scope, record.id, deps.db).then((fresh) => fresh.generation);
        deps.generationReads.set(workspace, reading);
      }
      const generation = await reading;
      if (engine.generationOf(workspace) === undefined) engine.tagGeneration(workspace, generation);
    }
  }
  return workspace;
}

/**
 * Applies the agent's stored defaults (default MCPs, default skills) to its scopes of the attached
 * workspace, so they take effect from the agent's next use on. Stored values that no longer parse (an
 * agent saved before validation) are skipped with a warning rather than failing every turn.
 */
export async function applyAgentDefaults(
  deps: Pick<AttachDeps, "engine" | "db" | "agentReads">,
  scope: TenantScope,
  workspace: Workspace,
  agentId: string | null,
): Promise<void> {
  if (!agentId) return;
  // One read per agent at a time in this process, however many calls use its workspaces at once.
  const key = `${scope.tenantId}\0${agentId}`;
  let loading = deps.agentReads.get(key);
  if (!loading) {
    loading = getAgentOrNull(scope, agentId, deps.db).finally(() => deps.agentReads.delete(key));
    deps.agentReads.set(key, loading);
  }
  await applyDefaultsOf(deps, workspace, await loading);
}

/** The agent's stored defaults on its scopes of the workspace (an agent the caller has read already). */
export async function applyDefaultsOf(
  deps: Pick<AttachDeps, "engine">,
  workspace: Workspace,
  agent: AgentDefaults | null,
): Promise<void> {
  if (!agent) return;
  const agentId = agent.id;
  const mcps = ZAgentDefaultMcps.safeParse(agent.defaultMcpConfigs);
  const skills = ZAgentDefaultSkills.safeParse(agent.defaultSkills);
  if (!mcps.success || !skills.success) {
    deps.engine.log.warn(
      { agentId, workspaceId: workspace.id },
      "ignoring the agent's invalid stored defaults",
    );
  }
  await workspace.setAgentDefaults(agentId, {
    // No defaults of its own: the installation's default MCPs apply.
    mcps: mcps.success && mcps.data.length > 0 ? mcps.data : null,
    skills: skills.success ? skills.data : [],
  });
}
