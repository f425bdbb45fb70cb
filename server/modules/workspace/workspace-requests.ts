import type { TenantScope } from "@/server/auth/scope";
import { auditActorNames, listPurgeReceipts } from "@/server/modules/audit/audit.data";
import type { BerthJobCatalog } from "@/server/queue/catalog";
import type { Enqueue } from "@/server/queue/enqueue";
import { AppError } from "@/server/shared/errors";
import type { WorkspaceDTO } from "./workspace.types";
import { transitionFrom } from "./workspace-lifecycle.data";

type Deps = {
  enqueue: Enqueue<BerthJobCatalog>;
  audited: <T>(
    scope: TenantScope,
    action: string,
    targetId: string,
    details: Record<string, unknown>,
    fn: () => Promise<T>,
  ) => Promise<T>;
  requireRecord: (scope: TenantScope, workspaceId: string) => Promise<WorkspaceDTO>;
};

/** `"user:<id>"` / `"api_key:<id>"` → its parts; anything else (system actors) → null. */
function actorRef(label: unknown): { type: string; id: string } | null {
  if (typeof label !== "string") return null;
  const match = /^(user|api_key):(.+)$/.exec(label);
  return match ? { type: match[1]!, id: match[2]! } : null;
}

/**
 * The admin requests on a workspace that workers carry out (stop, purge), and the receipts purges leave.
 * Part of the workspace service (spread into it).
 */
export function createWorkspaceRequests({ enqueue, audited, requireRecord }: Deps) {
  /** Asks the workers to stop a workspace (READY → STOPPING now, STOPPED by `workspace.stop`). */
  async function requestStop(
    scope: TenantScope,
    workspaceId: string,
    options: { force?: boolean; reason?: string } = {},
  ) {
    return audited(scope, "workspace.stop", workspaceId, { force: options.force ?? false }, async () => {
      const record = await requireRecord(scope, workspaceId);
      if (record.activeLeases > 0 && !options.force) {
        throw new AppError(
          "CONFLICT",
          `workspace ${workspaceId} has ${record.activeLeases} active lease(s)`,
          {
            userMessage: "The workspace is in use; pass force to stop it anyway.",
            details: { activeLeases: record.activeLeases },
          },
        );
      }
      const reason = options.reason ?? "stop requested by an admin";
      if (record.state === "READY") {
        await transitionFrom(scope, workspaceId, { from: ["READY"], to: "STOPPING", reason });
      } else if (record.state !== "STOPPING") {
        return { state: record.state, jobId: null };
      }
      const job = await enqueue("workspace.stop", { tenantId: scope.tenantId, workspaceId, reason });
      return { state: "STOPPING" as const, jobId: job.id ?? null };
    });
  }

  /**
   * Asks the workers to purge the workspace's current generation (files, skills, MCP declarations,
   * offload, rows). The sessions bound to it stay usable: their next use provisions the next generation.
   */
  async function requestPurge(
    scope: TenantScope,
    workspaceId: string,
    options: { force?: boolean; reason?: string } = {},
  ) {
    return audited(scope, "workspace.purge", workspaceId, { force: options.force ?? false }, async () => {
      const record = await requireRecord(scope, workspaceId);
      if (record.state === "PURGED" || record.state === "PURGING") {
        return { state: record.state, jobId: null, generation: record.generation };
      }
      if (record.activeLeases > 0 && !options.force) {
        throw new AppError(
          "CONFLICT",
          `workspace ${workspaceId} has ${record.activeLeases} active lease(s)`,
          {
            userMessage: "The workspace is in use; pass force to purge it anyway.",
          },
        );
      }
      const job = await enqueue("workspace.purge", {
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
    });
  }

  /**
   * What purges deleted, newest first, each with who asked for it by name: the requester recorded in the
   * receipt (`deleted.requestedBy`, else the receipt's actor) as an email or API key name.
   */
  async function purgeReceipts(
    scope: TenantScope,
    options: { targetType?: "workspace" | "session" | "agent"; targetId?: string; limit?: number },
  ) {
    const receipts = await listPurgeReceipts(scope, options);
    const requesterOf = (receipt: (typeof receipts)[number]) => {
      const deleted = receipt.deleted as { requestedBy?: unknown } | null;
      return typeof deleted?.requestedBy === "string" ? deleted.requestedBy : receipt.actor;
    };
    const names = await auditActorNames(
      scope,
      receipts.flatMap((receipt) => actorRef(requesterOf(receipt)) ?? []),
    );
    return receipts.map((receipt) => {
      const requestedBy = requesterOf(receipt);
      return { ...receipt, requestedBy, requestedByName: names.get(requestedBy) ?? null };
    });
  }

  return { requestStop, requestPurge, purgeReceipts };
}
