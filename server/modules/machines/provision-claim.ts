import type { Db } from "@/server/db";
import { releaseWorkspaceClaim, renewWorkspaceClaim } from "@/server/modules/workspace/workspace-claim.data";
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "@/server/logger";
import { readProvisionClaim, takeProvisionClaim } from "./provision-claim.data";

/**
 * One provision run's claim on creating a workspace's machine (provision-claim.data.ts says why it lives in
 * Postgres). A run that has it renews it every third of `heldForMs` while the driver creates; a run that
 * finds it held waits until the state changes or the claim lapses, then looks at the workspace afresh.
 */

// Default lapse: BullMQ's default lock duration, so a run whose worker died is taken over about when
// stalled-job recovery hands its job to another worker.
export const DEFAULT_PROVISION_CLAIM_MS = 30_000;
// How often a waiting run looks again (the holder may finish well before its claim would lapse).
const WAIT_POLL_MS = 1_000;

const processTag = `${process.pid}-${randomUUID().slice(0, 8)}`;
const liveHolders = new Set<string>();

export type ProvisionClaim = {
  /** Stops renewing and lets the claim go (a state change already cleared it). Never throws. */
  end(): Promise<void>;
  /** Stops renewing, without a statement: the run's state change cleared the claim already. */
  settled(): void;
};

/**
 * Takes the claim on `workspaceId` (PROVISIONING) for a new run of this process: the claim, renewed until
 * `end()`, or null when another run holds it.
 */
export async function claimProvision(
  workspaceId: string,
  heldForMs: number,
  log: Logger,
  db: Db,
): Promise<ProvisionClaim | null> {
  const holder = `${processTag}:${randomUUID()}`;
  liveHolders.add(holder);
  let taken = false;
  try {
    taken = await takeProvisionClaim(
      workspaceId,
      { holder, processTag, live: () => [...liveHolders] },
      heldForMs,
      db,
    );
  } finally {
    if (!taken) liveHolders.delete(holder);
  }
  if (!taken) return null;
  return renewedClaim(workspaceId, holder, heldForMs, log, db);
}

/**
 * A claim for a new run of this process that its caller takes in the same statement as entering
 * PROVISIONING (transitionFrom's `provisionClaim`), so no other run can take it in between; `hold` starts
 * renewing it once taken.
 */
export function newProvisionRun(
  workspaceId: string,
  heldForMs: number,
  log: Logger,
  db: Db,
): {
  claim: { holder: string; heldUntil: Date };
  hold: () => ProvisionClaim;
  /** The transition did not happen: the holder is dropped. */
  drop: () => void;
} {
  const holder = `${processTag}:${randomUUID()}`;
  liveHolders.add(holder);
  return {
    claim: { holder, heldUntil: new Date(Date.now() + heldForMs) },
    hold: () => renewedClaim(workspaceId, holder, heldForMs, log, db),
    drop: () => void liveHolders.delete(holder),
  };
}

/** Renews `holder`'s claim on `workspaceId` every third of `heldForMs` until `end()`. */
function renewedClaim(
  workspaceId: string,
  holder: string,
  heldForMs: number,
  log: Logger,
  db: Db,
): ProvisionClaim {
  const renewing = setInterval(
    () => {
      renewWorkspaceClaim("provision", workspaceId, holder, heldForMs, db).then(
        (held) => {
          if (!held) log.warn({ workspaceId }, "the provision claim was taken over while this run created");
        },
        // A database hiccup: the next renewal tries again (the claim lapses only after heldForMs).
        (error: unknown) => log.warn({ err: error, workspaceId }, "could not renew the provision claim"),
      );
    },
    Math.max(100, Math.floor(heldForMs / 3)),
  );
  renewing.unref();
  return {
    async end() {
      clearInterval(renewing);
      // Cleared already when the run changed the state; otherwise the next run need not wait for a lapse
      // (and if this fails too, this process' next run takes its own ended claim over at once).
      await releaseWorkspaceClaim("provision", workspaceId, holder, db).catch(() => undefined);
      liveHolders.delete(holder);
    },
    settled() {
      clearInterval(renewing);
      liveHolders.delete(holder);
    },
  };
}

/**
 * Waits while another run holds a live claim on `workspaceId`: until its state changes, its claim is
 * let go or lapses. Aborted by `signal` (shutdown, a lost job lock) with the signal's reason.
 */
export async function waitForProvisionClaim(
  workspaceId: string,
  signal: AbortSignal | undefined,
  db: Db,
): Promise<void> {
  for (;;) {
    signal?.throwIfAborted();
    const claim = await readProvisionClaim(workspaceId, db);
    if (!claim || claim.state !== "PROVISIONING" || !claim.holder || !claim.heldUntil) return;
    const lapsesIn = claim.heldUntil.getTime() - Date.now();
    const ownEnded = claim.holder.startsWith(`${processTag}:`) && !liveHolders.has(claim.holder);
    if (lapsesIn <= 0 || ownEnded) return;
    await sleep(Math.min(WAIT_POLL_MS, lapsesIn + 1), undefined, { signal }).catch((error: unknown) => {
      throw signal?.aborted ? signal.reason : error;
    });
  }
}
