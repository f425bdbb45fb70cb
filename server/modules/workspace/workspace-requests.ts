import type { TenantScope } from "@/server/auth/scope";
import type { Db } from "@/server/db";
import type { Logger } from "@/server/logger";
import { audited } from "@/server/modules/audit/audited";
import type { AuditRecorder } from "@/server/modules/audit/audit-buffer.service";
import { auditActorNames, listPurgeReceipts } from "@/server/modules/audit/audit.data";
import type { BerthJobCatalog } from "@/server/queue/catalog";
import type { Enqueue } from "@/server/queue/enqueue";
import { AppError, type AppErrorCode, toAppError } from "@/server/shared/errors";
import { announceChange } from "@/server/modules/live/change-feed";
import { setWorkspaceLabel } from "./workspace.data";
import { transitionFrom } from "./workspace-lifecycle.data";
import { requireWorkspaceRecord } from "./workspace-attach";

/*
 * The admin requests on a workspace that workers carry out (stop, start, purge, and the session and agent
 * purges), its label, and the receipts purges leave: one function per use case, composed by
 * createWorkspaceService.
 */

/** What the requests need: the process' enqueue, its database client and a logger for audit writes that fail. */
export type RequestDeps = {
  enqueue: Enqueue<BerthJobCatalog>;
  db: Db;
  log: Pick<Logger, "error">;
  /** Where the requests are audited (the root's `berth.audit`). */
  audit: AuditRecorder;
};

/** One workspace's outcome in a bulk action. */
type BulkOutcome = {
  workspaceId: string;
  ok: boolean;
  /** The state the request left it in (the job carries on from there). */
  state: string | null;
  jobId: string | null;
  error: { code: AppErrorCode; message: string } | null;
};

/** `"user:<id>"` / `"api_key:<id>"` → its parts; anything else (system actors) → null. */
function actorRef(label: unknown): { type: string; id: string } | null {
  if (typeof label !== "string") return null;
  const match = /^(user|api_key):(.+)$/.exec(label);
  return match ? { type: match[1]!, id: match[2]! } : null;
}

/** CONFLICT while a lease holds the workspace (a turn, a tool call, an open terminal), unless forced. */
function assertNotInUse(record: { id: string; activeLeases: number }, action: "stop" | "purge"): void {
  if (record.activeLeases === 0) return;
  throw new AppError("CONFLICT", `workspace ${record.id} has ${record.activeLeases} active lease(s)`, {
    userMessage: `The workspace is in use; pass force to ${action} it anyway.`,
    details: { activeLeases: record.activeLeases },
  });
}

/** Asks the workers to stop a workspace (READY → STOPPING now, STOPPED by `workspace.stop`). */
export async function requestStop(
  deps: RequestDeps,
  scope: TenantScope,
  workspaceId: string,
  options: { force?: boolean; reason?: string } = {},
) {
  return auditWorkspaceChange(
    deps,
    scope,
    "workspace.stop",
    workspaceId,
    { force: options.force ?? false },
    async () => {
      const record = await requireWorkspaceRecord(scope, workspaceId, deps.db);
      if (!options.force) assertNotInUse(record, "stop");
      const reason = options.reason ?? "stop requested by an admin";
      if (record.state === "READY") {
        await transitionFrom(scope, workspaceId, { from: ["READY"], to: "STOPPING", reason }, deps.db);
      } else if (record.state !== "STOPPING") {
        return { state: record.state, jobId: null };
      }
      const job = await deps.enqueue("workspace.stop", { tenantId: scope.tenantId, workspaceId, reason });
      return { state: "STOPPING" as const, jobId: job.id ?? null };
    },
  );
}

/**
 * Asks the workers to start a stopped (or failed, or never provisioned) workspace again: the provision job
 * every first use enqueues, so quotas and the ledger treat it the same. A workspace that is up or on its
 * way is left as it is; one stopping or being purged is refused (CONFLICT: start it once that is done).
 */
export async function requestStart(deps: RequestDeps, scope: TenantScope, workspaceId: string) {
  return auditWorkspaceChange(deps, scope, "workspace.start", workspaceId, {}, async () => {
    const record = await requireWorkspaceRecord(scope, workspaceId, deps.db);
    if (record.state === "READY" || record.state === "PROVISIONING") {
      return { state: record.state, jobId: null };
    }
    if (record.state === "STOPPING" || record.state === "PURGING") {
      throw new AppError("CONFLICT", `workspace ${workspaceId} is ${record.state}`, {
        userMessage: `The workspace is ${record.state.toLowerCase()}; start it once that is done.`,
        details: { state: record.state },
      });
    }
    const job = await deps.enqueue("workspace.provision", {
      tenantId: scope.tenantId,
      workspaceId,
      reason: "start requested",
    });
    announceChange(scope.tenantId, { topic: "workspace", id: workspaceId, userId: record.userId });
    return { state: record.state, jobId: job.id ?? null };
  });
}

/** Names the workspace on the dashboard (null or blank clears the name). */
export async function labelWorkspace(
  deps: Pick<RequestDeps, "log" | "db" | "audit">,
  scope: TenantScope,
  workspaceId: string,
  label: string | null,
) {
  const name = label?.trim() ? label.trim() : null;
  return auditWorkspaceChange(deps, scope, "workspace.label", workspaceId, { label: name }, async () => {
    const record = await requireWorkspaceRecord(scope, workspaceId, deps.db);
    await setWorkspaceLabel(scope, workspaceId, name, deps.db);
    announceChange(scope.tenantId, { topic: "workspace", id: workspaceId, userId: record.userId });
    return { label: name };
  });
}

/**
 * Asks the workers to purge the workspace's current generation (files, skills, MCP declarations,
 * offload, rows). The sessions bound to it stay usable: their next use provisions the next generation.
 */
export async function requestPurge(
  deps: RequestDeps,
  scope: TenantScope,
  workspaceId: string,
  options: { force?: boolean; reason?: string } = {},
) {
  return auditWorkspaceChange(
    deps,
    scope,
    "workspace.purge",
    workspaceId,
    { force: options.force ?? false },
    async () => {
      const record = await requireWorkspaceRecord(scope, workspaceId, deps.db);
      if (record.state === "PURGED" || record.state === "PURGING") {
        return { state: record.state, jobId: null, generation: record.generation };
      }
      if (!options.force) assertNotInUse(record, "purge");
      const job = await deps.enqueue("workspace.purge", {
        tenantId: scope.tenantId,
        workspaceId,
        reason: options.reason ?? "purge requested",
        generation: record.generation,
        actor: scope.apiKeyId
          ? `api_key:${scope.apiKeyId}`
          : scope.userId
            ? `user:${scope.userId}`
            : "system",
      });
      return { state: record.state, jobId: job.id ?? null, generation: record.generation };
    },
  );
}

/**
 * What purges deleted, newest first, each with who asked for it by name: the requester recorded in the
 * receipt (`deleted.requestedBy`, else the receipt's actor) as an email or API key name.
 */
export async function listPurgeReceiptsWithRequesters(
  deps: Pick<RequestDeps, "db">,
  scope: TenantScope,
  options: { targetType?: "workspace" | "session" | "agent"; targetId?: string; limit?: number },
) {
  const receipts = await listPurgeReceipts(scope, options, deps.db);
  const requesterOf = (receipt: (typeof receipts)[number]) => {
    const deleted = receipt.deleted as { requestedBy?: unknown } | null;
    return typeof deleted?.requestedBy === "string" ? deleted.requestedBy : receipt.actor;
  };
  const names = await auditActorNames(
    scope,
    receipts.flatMap((receipt) => actorRef(requesterOf(receipt)) ?? []),
    deps.db,
  );
  return receipts.map((receipt) => {
    const requestedBy = requesterOf(receipt);
    return { ...receipt, requestedBy, requestedByName: names.get(requestedBy) ?? null };
  });
}

/**
 * One action on many workspaces (the list's bulk stop, start, purge): each goes through its own request
 * above (audited, its own job), one at a time, and reports its own outcome; one refused workspace does
 * not stop the others.
 */
export async function requestBulk(
  deps: RequestDeps,
  scope: TenantScope,
  input: { action: "stop" | "start" | "purge"; workspaceIds: readonly string[]; force?: boolean },
) {
  const results: BulkOutcome[] = [];
  for (const workspaceId of new Set(input.workspaceIds)) {
    try {
      const options = { force: input.force ?? false };
      const done =
        input.action === "stop"
          ? await requestStop(deps, scope, workspaceId, options)
          : input.action === "start"
            ? await requestStart(deps, scope, workspaceId)
            : await requestPurge(deps, scope, workspaceId, options);
      results.push({ workspaceId, ok: true, state: done.state, jobId: done.jobId, error: null });
    } catch (error) {
      const appError = toAppError(error);
      // A 5xx stays masked as everywhere else; a caller's error says what to do.
      const message = appError.isRetryable ? "Failed; try again." : appError.userMessage;
      results.push({
        workspaceId,
        ok: false,
        state: null,
        jobId: null,
        error: { code: appError.code, message },
      });
    }
  }
  return { action: input.action, results };
}

/** `session.purge`: forget sessions' MCP scopes and offload files in their workspace, through a job. */
export async function enqueueSessionPurge(
  deps: Pick<RequestDeps, "enqueue">,
  scope: TenantScope,
  input: { workspaceId: string; agentId: string; sessionIds: string[] },
) {
  const job = await deps.enqueue("session.purge", { tenantId: scope.tenantId, ...input });
  return { jobId: job.id ?? null };
}

/** `agent.purge`: forget an agent's skill partition and MCP scopes in every workspace it used. */
export async function enqueueAgentPurge(
  deps: Pick<RequestDeps, "enqueue">,
  scope: TenantScope,
  input: { agentId: string; workspaceIds: string[] },
) {
  const job = await deps.enqueue("agent.purge", { tenantId: scope.tenantId, ...input });
  return { jobId: job.id ?? null };
}

/** Runs a workspace mutation and audits it (target: the workspace) with its outcome. */
export function auditWorkspaceChange<T>(
  deps: Pick<RequestDeps, "log" | "audit">,
  scope: TenantScope,
  action: string,
  targetId: string,
  details: Record<string, unknown>,
  fn: () => Promise<T>,
): Promise<T> {
  return audited(
    deps.audit,
    scope,
    { action, targetType: "workspace", targetId, details },
    fn,
    (error: unknown) => deps.log.error({ err: error, action, targetId }, "audit write failed"),
  );
}
