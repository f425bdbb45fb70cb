import type { TenantScope } from "@/server/auth/scope";
import type { DbClient } from "@/server/db";
import type { Logger } from "@/server/logger";
import { appendWorkspaceEvent } from "@/server/modules/workspace/workspace.data";
import { captureCheckpoint } from "@/server/workspace/checkpoints/capture";
import type { CheckpointStore } from "@/server/workspace/checkpoints/checkpoint-store";
import { walkTree } from "@/server/workspace/checkpoints/tree";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import { WORKSPACE_LAYOUT } from "@/server/workspace/layout";
import { lastRunningMcps, latestCheckpointTree } from "./checkpoint.data";
import { fileChanges } from "./checkpoint-capture";

/** The event names at most this many paths of each kind; the counts are whole. */
const LISTED_PATHS = 50;

/**
 * After a machine of an existing workspace generation is recreated or resumed (a container recreated, an
 * E2B sandbox resumed, a Pod recreated on its claim), compares its work folder with the last checkpoint
 * and records what survived and what was lost or changed as an `integrity_checked` event: a silent loss
 * becomes a visible one, and reverting to that checkpoint restores it. The folder's files include the
 * offload index (`sessions/`, whose lost entries are also named apart) and skills. Processes do not survive
 * a recreate: the MCP servers the last checkpoint recorded as running are named as stopped (each starts
 * again on its next use, without whatever it held in memory). Never fails the provision: a check that
 * cannot run is logged.
 */
export async function checkResumeIntegrity(
  deps: { store: CheckpointStore; db: DbClient; log: Pick<Logger, "warn"> },
  scope: TenantScope,
  workspace: { id: string; generation: number; backendKind: string },
  machine: {
    /** Runs `check` on the attached machine (attached only if there is something to compare with). */
    withMachine(check: (machine: WorkspaceMachine) => Promise<void>): Promise<void>;
    signal?: AbortSignal;
  },
): Promise<void> {
  try {
    const last = await latestCheckpointTree(scope, workspace.id, workspace.generation, deps.db);
    if (!last) return;
    let root: string | undefined;
    await machine.withMachine(async (attached) => {
      const captured = await captureCheckpoint({
        machine: attached,
        store: deps.store,
        tenantId: scope.tenantId,
        previous: last,
        ...(machine.signal ? { signal: machine.signal } : {}),
      });
      root = captured.root;
    });
    if (root === undefined) return;
    const changes = await fileChanges(deps.store, scope.tenantId, last, root);
    let recorded = 0;
    const readTree = (hash: string) => deps.store.readTree(scope.tenantId, hash);
    for await (const entry of walkTree(readTree, last)) if (entry.type !== "dir") recorded += 1;
    const lost = changes.filter((change) => change.kind === "removed").map((change) => change.path);
    const changed = changes.filter((change) => change.kind === "changed").map((change) => change.path);
    const added = changes.filter((change) => change.kind === "added").length;
    const survived = recorded - lost.length - changed.length;
    const offloadLost = lost.filter((path) => path.startsWith(`${WORKSPACE_LAYOUT.sessionsDir}/`));
    const mcpStopped = await lastRunningMcps(scope, workspace.id, workspace.generation, deps.db);
    const files =
      lost.length + changed.length === 0
        ? `the machine came back with all ${recorded} files of the last checkpoint`
        : `the machine came back without ${lost.length} and with ${changed.length} changed of the ` +
          `${recorded} files of the last checkpoint; reverting to it restores them`;
    const processes =
      mcpStopped.length === 0
        ? ""
        : `; MCP servers running then and not now: ${mcpStopped.join(", ")} (each starts again on its next use)`;
    const reason = files + processes;
    await appendWorkspaceEvent(
      scope,
      workspace.id,
      {
        kind: "integrity_checked",
        reason,
        data: {
          backend: workspace.backendKind,
          generation: workspace.generation,
          checkpointTree: last,
          survived,
          lostCount: lost.length,
          changedCount: changed.length,
          addedCount: added,
          lost: lost.slice(0, LISTED_PATHS),
          changed: changed.slice(0, LISTED_PATHS),
          offloadLostCount: offloadLost.length,
          offloadLost: offloadLost.slice(0, LISTED_PATHS),
          mcpStopped,
        },
      },
      deps.db,
    );
  } catch (error) {
    deps.log.warn({ err: error, workspaceId: workspace.id }, "could not check a resumed workspace's files");
  }
}
