import type { Db } from "@/server/db";
import type { TenantScope } from "@/server/auth/scope";
import { appendWorkspaceEvent } from "@/server/modules/workspace/workspace.data";
import type { WorkspaceRecord } from "@/server/modules/workspace/workspace-lifecycle.data";

/**
 * The `data_lost` ledger entry: the workspace's machine (host folder, container data, sandbox) went away
 * behind Berth's back, so what it held is gone and the next provision starts empty (issue 11).
 */
export async function recordDataLostEvent(
  scope: TenantScope,
  record: WorkspaceRecord,
  reason: string,
  db: Db,
): Promise<void> {
  await appendWorkspaceEvent(
    scope,
    record.id,
    {
      kind: "data_lost",
      reason: `${reason}: the workspace's files are lost; it is provisioned again, empty`,
      data: { backend: record.backendKind, generation: record.generation, state: record.state },
    },
    db,
  );
}
