/**
 * One Berth installation's worker side, for installations.test.ts: the production composition (getEngine:
 * drivers labelled with the installation id its own database holds) over its own DATABASE_URL, basedir and
 * Redis prefix, on the Docker or the Kubernetes backend (BERTH_WORKSPACE_BACKEND). Prints "ready"; then per
 * stdin line `{"id", "op", ...}` runs the worker's own job function and prints `{"id", "ok", "result" | "error"}`:
 *   installation → its id; provision {workspaceId} → a tenant's workspace provisioned (its container's or
 *   Pod's name);
 *   forget {workspaceId} → the record deleted (the container becomes this installation's orphan);
 *   reconcile → `workspace.reconcile`'s report.
 */
import { createInterface } from "node:readline";
import { resolveSystemTenantScope } from "@/server/auth/resolve";
import { getDb } from "@/server/db";
import { createLogger } from "@/server/logger";
import { ensureInstallationId } from "@/server/modules/installation/installation.data";
import { provisionWorkspace } from "@/server/modules/machines/machine-jobs.service";
import { reconcileWorkspaces } from "@/server/modules/machines/reconcile.service";
import { upsertWorkspaceBinding } from "@/server/modules/workspace/workspace.data";
import { getQueues } from "@/server/queue/queues";
import { containerName } from "@/server/workspace/drivers/docker/docker-config";
import { podName } from "@/server/workspace/drivers/kubernetes/kubernetes-names";
import { createTestTenant } from "../db/fixtures";
import { closeProcessBerth } from "@/server/composition/process-berth";
import { processBerth } from "@/server/composition/process-berth";

const log = createLogger({ level: "silent" });
const engine = processBerth().engine;
const tenant = await createTestTenant();
const backendKind = process.env.BERTH_WORKSPACE_BACKEND === "kubernetes" ? "kubernetes" : "docker";
const machineName = backendKind === "kubernetes" ? podName : containerName;

type Request = { id: number; op: string; workspaceId?: string };

async function run(request: Request): Promise<unknown> {
  switch (request.op) {
    case "installation":
      return ensureInstallationId(processBerth().db);
    case "provision": {
      const workspaceId = request.workspaceId!;
      const scope = await resolveSystemTenantScope(tenant.tenantId, undefined, processBerth().db);
      await upsertWorkspaceBinding(
        scope,
        {
          id: workspaceId,
          backendKind,
          isolationPolicy: "PER_AGENT",
          userId: tenant.owner.id,
        },
        { config: processBerth().config.quotas },
        processBerth().db,
      );
      await provisionWorkspace(
        {
          db: processBerth().db,
          drivers: engine.drivers,
          config: engine.config,
          quota: () => processBerth().quota,
          usage: () => processBerth().usage,
          stageSamples: () => processBerth().stageSamples,
          lifecycle: processBerth().lifecycle,
        },
        { tenantId: tenant.tenantId, workspaceId, reason: "test", machineGone: false },
        log,
      );
      return machineName({ tenantId: tenant.tenantId, userId: tenant.owner.id, workspaceId });
    }
    case "forget":
      await getDb().workspace.delete({ where: { id: request.workspaceId! } });
      return null;
    case "reconcile":
      // No record is left mid-transition here: a re-enqueue would mean the test itself went wrong.
      return reconcileWorkspaces(
        {
          db: processBerth().db,
          drivers: engine.drivers,
          requestProvision: () => Promise.reject(new Error("unexpected provision re-enqueue")),
          requestStop: () => Promise.reject(new Error("unexpected stop re-enqueue")),
        },
        { trigger: "manual", dryRun: false },
        log,
      );
    default:
      throw new Error(`unknown op ${request.op}`);
  }
}

process.stdout.write("ready\n");
for await (const line of createInterface({ input: process.stdin })) {
  if (line.trim() === "exit") break;
  const request = JSON.parse(line) as Request;
  try {
    process.stdout.write(`${JSON.stringify({ id: request.id, ok: true, result: await run(request) })}\n`);
  } catch (error) {
    process.stdout.write(`${JSON.stringify({ id: request.id, ok: false, error: String(error) })}\n`);
  }
}
await engine.close();
await getQueues().close();
await closeProcessBerth();
process.exit(0);
