import type { Prisma } from "@/generated/prisma/client";
import { type DbClient } from "@/server/db";

/**
 * The provision claim's rows. A PROVISIONING workspace's machine is created by one run at a time: the run
 * named by `provisionHolder`, whose claim lapses at `provisionHeldUntil` unless renewed. BullMQ's job lock
 * alone cannot say so: it lives in Redis, and when Redis loses its data (a restart without persistence, a
 * failover) while a worker creates the machine, the API's provision gate finds the job gone and enqueues it
 * again; the worker that takes the new job must wait for the run still under way, not create the machine a
 * second time. Every state change clears the claim (setState in workspace-lifecycle.data.ts).
 *
 * A holder is `<process tag>:<run id>`. A claim of this process' own whose run is over (it ended while the
 * database was unreachable, so it could not let go) is taken over at once by the next run here, instead of
 * waiting for it to lapse.
 */

type ProvisionClaimHolders = {
  /** This run's holder id. */
  readonly holder: string;
  /** The prefix every holder of this process starts with. */
  readonly processTag: string;
  /** The holders of this process whose runs are still under way (this run's included). */
  readonly live: () => readonly string[];
};

/**
 * Claims the creation of `workspaceId`'s machine for `holders.holder`, held for `heldForMs`: true when the
 * workspace is PROVISIONING and nobody else holds a live claim on it (none, lapsed, this process' own
 * ended run, or this holder's already).
 */
export async function takeProvisionClaim(
  workspaceId: string,
  holders: ProvisionClaimHolders,
  heldForMs: number,
  db: DbClient,
): Promise<boolean> {
  const now = new Date();
  const { count } = await db.workspace.updateMany({
    where: {
      id: workspaceId,
      state: "PROVISIONING",
      OR: [
        { provisionHolder: null },
        { provisionHeldUntil: null },
        { provisionHeldUntil: { lte: now } },
        { provisionHolder: holders.holder },
        {
          AND: [
            { provisionHolder: { startsWith: `${holders.processTag}:` } },
            { provisionHolder: { notIn: [...holders.live()] } },
          ],
        },
      ],
    },
    data: { provisionHolder: holders.holder, provisionHeldUntil: new Date(now.getTime() + heldForMs) },
  });
  return count === 1;
}

/** The workspace's state and claim as they are now (null: the record is gone). */
export async function readProvisionClaim(
  workspaceId: string,
  db: DbClient,
): Promise<{ state: string; holder: string | null; heldUntil: Date | null } | null> {
  const row = await db.workspace.findUnique({
    where: { id: workspaceId },
    select: { state: true, provisionHolder: true, provisionHeldUntil: true },
  });
  return row && { state: row.state, holder: row.provisionHolder, heldUntil: row.provisionHeldUntil };
}

/**
 * Records the machine a PROVISIONING workspace got before it is READY (a warm pool's, bound to it): a retry
 * of the provision then finds its own machine through the handle instead of taking another.
 */
export async function storeHandleWhileProvisioning(
  workspaceId: string,
  handle: Record<string, unknown>,
  db: DbClient,
): Promise<void> {
  await db.workspace.updateMany({
    where: { id: workspaceId, state: "PROVISIONING" },
    data: { backendHandle: handle as Prisma.InputJsonValue },
  });
}
