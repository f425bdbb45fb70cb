import type { TenantScope } from "@/server/auth/scope";
import type { Logger } from "@/server/logger";
import { isConnectionError } from "@/server/shared/errors";

/** A lease whose release did not land (the database was away when its turn or call ended). */
export type PendingLeaseRelease = {
  scope: TenantScope;
  workspaceId: string;
  holder: string;
  quiet: boolean;
  /** When the work ended: the idle clock starts then, not when the release finally lands. */
  endedAt: Date;
};

export type LeaseReleaseRetry = {
  /** Keeps retrying this release (with backoff) until it lands, the process closes, or it ages out. */
  schedule(release: PendingLeaseRelease): void;
  /**
   * The holder took its lease again: a later retry must not delete the new one. (Holders are unique per
   * turn, call and terminal, so this is a safeguard, not a case that happens.)
   */
  cancel(scope: TenantScope, workspaceId: string, holder: string): void;
  pending(): number;
  /** Stops retrying; what is still pending is left to the dead-holder cleanup (see below). */
  close(): Promise<void>;
};

const MAX_PENDING = 10_000;
const FIRST_DELAY_MS = 250;
const MAX_DELAY_MS = 30_000;
// A release refused for another reason than a lost connection (it should not happen: the delete is
// conditional) is given up after this many tries rather than retried for ever.
const MAX_OTHER_FAILURES = 10;

// `touch`: the lease is gone, the idle clock still has to move (a separate statement, as in releaseLease).
type Entry = PendingLeaseRelease & {
  since: number;
  step: "release" | "touch" | "done";
  otherFailures: number;
};

/**
 * Retries lease releases that failed, so a lease does not outlive its work when the database was away at
 * the moment the work ended. Without this the lease leaked: its owner process is alive, so the dead-holder
 * reaper (server/modules/chat/dead-holders.ts) never frees it, and the sweeper does not idle-stop a leased
 * workspace until the lease reaches the maximum lease age (an hour). One timer for all pending releases,
 * backing off while the database stays away (a pass stops at the first lost connection); memory bounded by
 * MAX_PENDING (the oldest is dropped with a warning). A release older than `giveUpAfterMs` (the maximum
 * lease age) is dropped: the sweeper drops such leases itself. On close, whatever is left belongs to the
 * dead-holder cleanup: a clean shutdown removes this process' `holders` heartbeat, so any live process
 * releases the leases it owned.
 */
export function createLeaseReleaseRetry(deps: {
  /** Deletes the lease; true when it was still there (and was deleted now). */
  release(release: PendingLeaseRelease): Promise<boolean>;
  /** Moves the workspace's idle clock to when the work ended (skipped for quiet leases). */
  touch(release: PendingLeaseRelease): Promise<void>;
  log: Logger;
  giveUpAfterMs: number;
  maxPending?: number;
}): LeaseReleaseRetry {
  const maxPending = deps.maxPending ?? MAX_PENDING;
  const entries = new Map<string, Entry>();
  let delayMs = FIRST_DELAY_MS;
  let timer: NodeJS.Timeout | undefined;
  let pass: Promise<void> | undefined;
  let closed = false;

  const keyOf = (scope: TenantScope, workspaceId: string, holder: string) =>
    `${scope.tenantId}\0${workspaceId}\0${holder}`;

  function arm(): void {
    if (closed || timer || pass || entries.size === 0) return;
    timer = setTimeout(() => {
      timer = undefined;
      pass = retryAll().finally(() => {
        pass = undefined;
        arm();
      });
    }, delayMs);
    // Never keeps a process alive on its own: a process that ends hands its leases to the cleanup.
    timer.unref();
  }

  /** One pass over the pending releases, oldest first; stops (and backs off) while the database is away. */
  async function retryAll(): Promise<void> {
    for (const [key, entry] of [...entries]) {
      if (closed) return;
      if (entries.get(key) !== entry) continue; // cancelled meanwhile
      if (Date.now() - entry.since > deps.giveUpAfterMs) {
        entries.delete(key);
        deps.log.warn(logged(entry), "gave up releasing a lease: it is past the maximum lease age");
        continue;
      }
      try {
        if (entry.step === "release") {
          const deleted = await deps.release(entry);
          entry.step = deleted && !entry.quiet ? "touch" : "done";
        }
        if (entry.step === "touch") await deps.touch(entry);
        if (entries.get(key) === entry) entries.delete(key);
        deps.log.info(logged(entry), "released a lease after its first release failed");
      } catch (error) {
        if (isConnectionError(error)) {
          // The database is still away: the rest would fail the same way.
          delayMs = Math.min(delayMs * 2, MAX_DELAY_MS);
          return;
        }
        entry.otherFailures += 1;
        if (entry.otherFailures >= MAX_OTHER_FAILURES && entries.get(key) === entry) {
          entries.delete(key);
          deps.log.error({ ...logged(entry), err: error }, "gave up releasing a lease");
        }
      }
    }
    delayMs = FIRST_DELAY_MS;
  }

  return {
    schedule(release) {
      if (closed) {
        deps.log.warn(
          logged(release),
          "lease release not retried (closing): left to the dead-holder cleanup",
        );
        return;
      }
      const key = keyOf(release.scope, release.workspaceId, release.holder);
      entries.delete(key);
      if (entries.size >= maxPending) {
        const [oldestKey, oldest] = entries.entries().next().value as [string, Entry];
        entries.delete(oldestKey);
        deps.log.warn(logged(oldest), "too many lease releases pending: dropped the oldest");
      }
      entries.set(key, { ...release, since: Date.now(), step: "release", otherFailures: 0 });
      arm();
    },
    cancel(scope, workspaceId, holder) {
      entries.delete(keyOf(scope, workspaceId, holder));
    },
    pending: () => entries.size,
    async close() {
      closed = true;
      clearTimeout(timer);
      timer = undefined;
      await pass;
      if (entries.size > 0) {
        deps.log.warn(
          { leases: [...entries.values()].map(logged) },
          "lease releases still pending at shutdown: left to the dead-holder cleanup",
        );
      }
      entries.clear();
    },
  };
}

function logged(release: PendingLeaseRelease) {
  return { tenantId: release.scope.tenantId, workspaceId: release.workspaceId, holder: release.holder };
}
