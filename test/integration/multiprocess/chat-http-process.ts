/**
 * A web replica over real HTTP for the multi-process fault tests: the process-wide composition a Next.js
 * server builds (processApiRuntime, handleTrpcRequest over the app router, whose chat uses
 * processBerth().agents over processBerth().engine), served on a loopback port. Prints `ready <url>`. Stdin commands:
 *   `lease <tenantId> <userId> <workspaceId>` holds a `call:` lease on the workspace for good (as a long
 *   file transfer would) and prints `leased`.
 */
import { createInterface } from "node:readline";
import { handleTrpcRequest } from "@/server/api/http-handler";
import { mintTenantScope } from "@/server/auth/scope";
import { serveFetchHandler } from "../api/support/serve-fetch-handler";
import { processApiRuntime } from "@/server/api/composition";
import { processBerth } from "@/server/composition/process-berth";

const runtime = processApiRuntime();
void processBerth().agents; // the turn registry, cancel bus and dead-holder reaper run from the start, as in a replica
const server = await serveFetchHandler((request) => handleTrpcRequest(request, runtime));
process.stdout.write(`ready ${server.url}\n`);

for await (const line of createInterface({ input: process.stdin })) {
  const [command, tenantId, userId, workspaceId] = line.trim().split(" ");
  if (command !== "lease" || !tenantId || !userId || !workspaceId) continue;
  // Test-only: the scope the auth gate would mint for the tenant's owner.
  const scope = mintTenantScope({ tenantId, userId, apiKeyId: null, role: "owner" });
  void processBerth().workspaces.service.withWorkspace(scope, workspaceId, "held by the fault test", () => {
    process.stdout.write("leased\n");
    return new Promise<never>(() => undefined);
  });
}
