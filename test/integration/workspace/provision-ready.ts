import { expect } from "vitest";
import type { TenantScope } from "@/server/auth/scope";
import { getWorkspace, upsertWorkspaceBinding } from "@/server/modules/workspace/workspace.data";
import { createEnqueue } from "@/server/queue/enqueue";
import { getQueues } from "@/server/queue/queues";
import { jobOutcome } from "../queue/queue-fixtures";
import { processBerth } from "@/server/composition/process-berth";

/**
 * Binds `workspaceId` on the local backend and has it provisioned for real by whichever worker takes the
 * job (the test's worker process, or the app's in-process workers): resolves once it is READY.
 */
export async function provisionReadyLocalWorkspace(
  scope: TenantScope,
  workspaceId: string,
  reason: string,
  /** The agent the workspace belongs to (none by default). */
  agentId?: string,
): Promise<string> {
  await upsertWorkspaceBinding(
    scope,
    {
      id: workspaceId,
      backendKind: "local",
      isolationPolicy: "PER_AGENT",
      ...(agentId ? { agentId } : {}),
    },
    { config: processBerth().config.quotas },
    processBerth().db,
  );
  const job = await createEnqueue(processBerth().queues)("workspace.provision", {
    tenantId: scope.tenantId,
    workspaceId,
    reason,
  });
  await jobOutcome(getQueues().get("workspace"), job, 60_000);
  expect((await getWorkspace(scope, workspaceId, processBerth().db)).state).toBe("READY");
  return workspaceId;
}
