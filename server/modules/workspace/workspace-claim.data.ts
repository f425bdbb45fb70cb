import { type DbClient } from "@/server/db";

/**
 * The two claims a workspace row holds while one run does long work on its machine: the provision claim
 * (PROVISIONING, `provisionHolder`/`provisionHeldUntil`, machines/provision-claim.data.ts) and the purge
 * claim (PURGING, `purgeHolder`/`purgeHeldUntil`, purge/workspace-purge.data.ts). Taking one differs per
 * kind; renewing and letting go are the same, here.
 */
export type WorkspaceClaimKind = "provision" | "purge";

const CLAIMS = {
  provision: {
    state: "PROVISIONING",
    heldBy: (holder: string) => ({ provisionHolder: holder }),
    holding: (holder: string | null, until: Date | null) => ({
      provisionHolder: holder,
      provisionHeldUntil: until,
    }),
    until: (until: Date) => ({ provisionHeldUntil: until }),
  },
  purge: {
    state: "PURGING",
    heldBy: (holder: string) => ({ purgeHolder: holder }),
    holding: (holder: string | null, until: Date | null) => ({ purgeHolder: holder, purgeHeldUntil: until }),
    until: (until: Date) => ({ purgeHeldUntil: until }),
  },
} as const;

/** Holds the claim for another `heldForMs`; false when `holder` no longer holds it (its run must stop). */
export async function renewWorkspaceClaim(
  kind: WorkspaceClaimKind,
  workspaceId: string,
  holder: string,
  heldForMs: number,
  db: DbClient,
): Promise<boolean> {
  const claim = CLAIMS[kind];
  const { count } = await db.workspace.updateMany({
    where: { id: workspaceId, state: claim.state, ...claim.heldBy(holder) },
    data: claim.until(new Date(Date.now() + heldForMs)),
  });
  return count === 1;
}

/**
 * Lets the claim go now (a run that ended without a state change, or was stopped by a shutdown), so the
 * next run need not wait for it to lapse. A state change already cleared it: then this changes nothing.
 */
export async function releaseWorkspaceClaim(
  kind: WorkspaceClaimKind,
  workspaceId: string,
  holder: string,
  db: DbClient,
): Promise<void> {
  const claim = CLAIMS[kind];
  await db.workspace.updateMany({
    where: { id: workspaceId, state: claim.state, ...claim.heldBy(holder) },
    data: claim.holding(null, null),
  });
}
