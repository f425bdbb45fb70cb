/**
 * An API-side process for the multi-process tests: its own engine (one WorkspaceManager) and workspace
 * service, exactly as a web replica builds them. Prints "ready", waits for a "go" line on stdin, then makes
 * MP_CALLS concurrent `resolveForSession` calls for MP_SESSION_ID (a comma-separated list: the calls go
 * round-robin over its sessions) and prints one JSON result line.
 */
import { createInterface } from "node:readline";
import { mintTenantScope } from "@/server/auth/scope";
import { composeEngine } from "@/server/composition/services";
import { loadEngineConfig } from "@/server/engine/engine-config";
import { createLogger } from "@/server/logger";
import { createWorkspaceService } from "@/server/modules/workspace/workspace.service";
import { getQueues } from "@/server/queue/queues";

const engine = composeEngine({
  config: loadEngineConfig(),
  queues: getQueues(),
  secret: "multiprocess-test-secret",
  log: createLogger({ level: "silent" }),
});
const service = createWorkspaceService(engine);
// Test-only: the scope an auth gate would mint for the tenant's owner.
const scope = mintTenantScope({
  tenantId: process.env.MP_TENANT_ID!,
  userId: process.env.MP_USER_ID!,
  apiKeyId: null,
  role: "owner",
});

process.stdout.write("ready\n");
const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (line.trim() !== "go") continue;
  const calls = Number(process.env.MP_CALLS ?? "100");
  const sessionIds = process.env.MP_SESSION_ID!.split(",");
  const results = await Promise.allSettled(
    Array.from({ length: calls }, (_, index) =>
      service.resolveForSession(scope, sessionIds[index % sessionIds.length]!),
    ),
  );
  const workspaceIds = [
    ...new Set(results.flatMap((r) => (r.status === "fulfilled" ? [r.value.workspace.id] : []))),
  ].sort();
  const errors = results.flatMap((r) => (r.status === "rejected" ? [String(r.reason)] : []));
  process.stdout.write(
    `${JSON.stringify({ ok: calls - errors.length, workspaceIds, errors: errors.slice(0, 3) })}\n`,
  );
  break;
}
await engine.close();
await getQueues().close();
process.exit(0);
