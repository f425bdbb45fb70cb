import { expect } from "vitest";
import { getWorkspace, upsertWorkspaceBinding } from "@/server/modules/workspace/workspace.data";
import { enqueue } from "@/server/queue/enqueue";
import { getQueues } from "@/server/queue/queues";
import type { SeededTenant } from "./seed";

/**
 * A workspace on the local backend (in the app's data dir), provisioned for real by the app's workers:
 * resolves once it is READY. `name` makes its id, unique per seeded tenant.
 */
export async function provisionLocalWorkspace(tenant: SeededTenant, name: string): Promise<string> {
  const workspaceId = `ws-${name}-${tenant.slug.slice("e2e-".length)}`;
  await upsertWorkspaceBinding(tenant.scope, {
    id: workspaceId,
    backendKind: "local",
    isolationPolicy: "PER_AGENT",
  });
  const job = await enqueue("workspace.provision", {
    tenantId: tenant.scope.tenantId,
    workspaceId,
    reason: `e2e: ${name}`,
  });
  await job.waitUntilFinished(await getQueues().events("workspace"), 60_000);
  expect((await getWorkspace(tenant.scope, workspaceId)).state).toBe("READY");
  return workspaceId;
}
