import { workspaceServiceOver } from "@/test/setup/test-berth";
/**
 * An API-side process for the multi-process tests: its own engine (one WorkspaceManager) and workspace
 * service, exactly as a web replica builds them. Prints "ready", then answers each `go` line on stdin: it
 * makes `calls` concurrent `resolveForSession` calls for `sessionIds` (round-robin) as the tenant's owner
 * and prints one JSON result line. A bare `go` takes them from MP_TENANT_ID, MP_USER_ID, MP_SESSION_ID (a
 * comma-separated list) and MP_CALLS; `go {"tenantId","userId","sessionIds","calls"}` names them, so one
 * process serves several tests of a file (each boot costs seconds of CPU).
 */
import { createInterface } from "node:readline";
import { mintTenantScope } from "@/server/auth/scope";
import { composeEngine } from "@/server/composition/compose-engine";
import { processBerth } from "@/server/composition/process-berth";
import { loadEngineConfig } from "@/server/engine/engine-config";
import { createLogger } from "@/server/logger";
import { getQueues } from "@/server/queue/queues";

type Request = { tenantId: string; userId: string; sessionIds: string[]; calls: number };

const engine = composeEngine({
  quota: () => processBerth().quota,
  attachTracker: () => processBerth().attachTracker,
  usage: () => processBerth().usage,
  stageSamples: () => processBerth().stageSamples,
  lifecycle: processBerth().lifecycle,
  encryptionKey: processBerth().config.secrets.encryptionKey,
  db: processBerth().db,
  config: loadEngineConfig(),
  queues: getQueues(),
  secret: "multiprocess-test-secret",
  log: createLogger({ level: "silent" }),
});
const service = workspaceServiceOver(engine);

function requestOf(line: string): Request {
  const named = line.slice("go".length).trim();
  if (named) return JSON.parse(named) as Request;
  return {
    tenantId: process.env.MP_TENANT_ID!,
    userId: process.env.MP_USER_ID!,
    sessionIds: process.env.MP_SESSION_ID!.split(","),
    calls: Number(process.env.MP_CALLS ?? "100"),
  };
}

async function resolveAll({ tenantId, userId, sessionIds, calls }: Request) {
  // Test-only: the scope an auth gate would mint for the tenant's owner.
  const scope = mintTenantScope({ tenantId, userId, apiKeyId: null, role: "owner" });
  const results = await Promise.allSettled(
    Array.from({ length: calls }, (_, index) =>
      service.resolveForSession(scope, sessionIds[index % sessionIds.length]!),
    ),
  );
  const workspaceIds = [
    ...new Set(results.flatMap((r) => (r.status === "fulfilled" ? [r.value.workspace.id] : []))),
  ].sort();
  const errors = results.flatMap((r) => (r.status === "rejected" ? [String(r.reason)] : []));
  return { ok: calls - errors.length, workspaceIds, errors: errors.slice(0, 3) };
}

process.stdout.write("ready\n");
const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (line.trim() === "exit") break;
  if (!line.startsWith("go")) continue;
  process.stdout.write(`${JSON.stringify(await resolveAll(requestOf(line)))}\n`);
}
await engine.close();
await getQueues().close();
process.exit(0);
