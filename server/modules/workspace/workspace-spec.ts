import type { WorkspaceSpec } from "@/server/workspace/provider";
import { IsolationPolicy } from "@/server/workspace/manager/isolation";
import type { WorkspaceRecord } from "./workspace-lifecycle.data";

const ISOLATION_OF: Record<string, IsolationPolicy> = {
  PER_AGENT: IsolationPolicy.PER_AGENT,
  PER_USER: IsolationPolicy.PER_USER,
  PER_SESSION: IsolationPolicy.PER_SESSION,
};

/**
 * The engine spec of a workspace record. Always built from the RECORD (never from the caller): the local
 * workdir is keyed by the record's tenant and user, so every process and every job finds the same place.
 */
export function specOfRecord(
  record: Pick<WorkspaceRecord, "id" | "tenantId" | "userId" | "agentId" | "isolationPolicy">,
): WorkspaceSpec {
  return {
    workspaceId: record.id,
    tenantId: record.tenantId,
    userId: record.userId ?? "",
    agentId: record.agentId ?? "",
    isolation: ISOLATION_OF[record.isolationPolicy] ?? IsolationPolicy.PER_AGENT,
  };
}

/** The manager's cache address of a record (same tenant/user/id as the spec). */
export function addressOfRecord(record: Pick<WorkspaceRecord, "id" | "tenantId" | "userId">) {
  return { tenantId: record.tenantId, userId: record.userId ?? "", workspaceId: record.id };
}
