import { provisionReadyLocalWorkspace } from "@/test/integration/workspace/provision-ready";
import type { SeededTenant } from "./seed";

/**
 * A workspace on the local backend (in the app's data dir), provisioned for real by the app's workers:
 * resolves once it is READY. `name` makes its id, unique per seeded tenant.
 */
export async function provisionLocalWorkspace(tenant: SeededTenant, name: string): Promise<string> {
  const workspaceId = `ws-${name}-${tenant.slug.slice("e2e-".length)}`;
  return provisionReadyLocalWorkspace(tenant.scope, workspaceId, `e2e: ${name}`);
}
