import type { BackendHandle, WorkspaceSpec } from "@/server/workspace/drivers/driver";
import { isolationOfStored } from "@/server/workspace/manager/isolation";
import type { WorkspaceRecord } from "./workspace-lifecycle.data";

/**
 * The engine spec of a workspace record. Always built from the RECORD (never from the caller): the local
 * workdir is keyed by the record's tenant and user, so every process and every job finds the same place.
 */
export function specOfRecord(
  record: Pick<WorkspaceRecord, "id" | "tenantId" | "userId" | "agentId" | "isolationPolicy"> &
    Partial<Pick<WorkspaceRecord, "backendHandle">>,
): WorkspaceSpec {
  return {
    workspaceId: record.id,
    tenantId: record.tenantId,
    userId: record.userId ?? "",
    agentId: record.agentId ?? "",
    isolation: isolationOfStored(record.isolationPolicy),
    // The reattach key the last provision stored (backends with remotely assigned ids need it).
    handle: handleOfRecord(record),
  };
}

/** The stored handle as the drivers take it (the column is JSON; anything but an object is no handle). */
export function handleOfRecord(
  record: Partial<Pick<WorkspaceRecord, "backendHandle">>,
): BackendHandle | null {
  const handle = record.backendHandle;
  return handle && typeof handle === "object" && !Array.isArray(handle) ? (handle as BackendHandle) : null;
}

/** The manager's cache address of a record (same tenant/user/id as the spec). */
export function addressOfRecord(record: Pick<WorkspaceRecord, "id" | "tenantId" | "userId">) {
  return { tenantId: record.tenantId, userId: record.userId ?? "", workspaceId: record.id };
}
