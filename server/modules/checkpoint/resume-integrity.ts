import type { Db } from "@/server/db";
import type { TenantScope } from "@/server/auth/scope";
import type { Logger } from "@/server/logger";
import { appendWorkspaceEvent } from "@/server/modules/workspace/workspace.data";
import { captureCheckpoint } from "@/server/workspace/checkpoints/capture";
import type { CheckpointStore } from "@/server/workspace/checkpoints/checkpoint-store";
import { diffTrees, walkTree } from "@/server/workspace/checkpoints/tree";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import { latestCheckpointTree } from "./checkpoint.data";

/** The event names at most this many paths of each kind; the counts are whole. */
const LISTED_PATHS = 50;

/**
 * After a machine of an existing workspace generation is recreated or resumed (a container recreated, an
 * E2B sandbox resumed, a Pod recreated on its claim), compares its work folder with the last checkpoint
 * and records what survived and what was lost or changed as an `integrity_checked` event: a silent loss
 * becomes a visible one, and reverting to that checkpoint restores it. The folder's files include the
 * offload index (`sessions/`) and skills. Never fails the provision: a check that cannot run is logged.
 */
export async function checkResumeIntegrity(
  deps: { store: CheckpointStore; log: Pick<Logger, "warn"> },
  scope: TenantScope,
  workspace: { id: string; generation: number; backendKind: string },
  machine: {
    /** Runs `check` on the attached machine (attached only if there is something to compare with). */
    withMachine(check: (machine: WorkspaceMachine) => Promise<void>): Promise<void>;
    signal?: AbortSignal;
  },
  db: Db,
): Promise<void> {
  try {
    const last = await latestCheckpointTree(scope, workspace.id, workspace.generation, db);
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
    const now = { root };
    const readTree = (hash: string) => deps.store.readTree(scope.tenantId, hash);
    const changes = (await diffTrees(readTree, last, now.root)).filter(
      (change) => (change.kind === "removed" ? change.before : change.after).type !== "dir",
    );
    let recorded = 0;
    for await (const entry of walkTree(readTree, last)) if (entry.type !== "dir") recorded += 1;
    const lost = changes.filter((change) => change.kind === "removed").map((change) => change.path);
    const changed = changes.filter((change) => change.kind === "changed").map((change) => change.path);
    const added = changes.filter((change) => change.kind === "added").length;
    const survived = recorded - lost.length - changed.length;
    const reason =
      lost.length + changed.length === 0
        ? `the machine came back with all ${recorded} files of the last checkpoint`
        : `the machine came back without ${lost.length} and with ${changed.length} changed of the ` +
          `${recorded} files of the last checkpoint; reverting to it restores them`;
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
        },
      },
      db,
    );
  } catch (error) {
    deps.log.warn({ err: error, workspaceId: workspace.id }, "could not check a resumed workspace's files");
  }
}
