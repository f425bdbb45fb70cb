import type { WorkspaceDTO, WorkspaceLeaseDTO } from "./workspace.types";

/**
 * Why a workspace is still running, for its page. Only WORK keeps a workspace alive: a turn's lease (its
 * commands and tools run inside it, so running processes are covered by it), a mutating API call's or a
 * transfer's lease, and the idle clock that such work last moved. Dashboard reads, file listings and
 * health probes take quiet leases that never move the idle clock, so browsing cannot keep it awake.
 */
export type WorkspaceLiveness = {
  running: boolean;
  /** One line per reason, most important first. */
  reasons: { kind: "turn" | "call" | "lease" | "idle_timer"; text: string; until: Date | null }[];
  /** When the sweeper may stop it if nothing happens (null: not running, or held by a lease). */
  stopsAfter: Date | null;
};

export function explainLiveness(
  record: Pick<WorkspaceDTO, "state" | "lastActivityAt" | "stateChangedAt">,
  leases: readonly WorkspaceLeaseDTO[],
  options: { idleTtlMs: number; maxLeaseMs: number; now?: Date },
): WorkspaceLiveness {
  const now = options.now ?? new Date();
  if (record.state !== "READY") return { running: false, reasons: [], stopsAfter: null };
  const live = leases.filter(
    (lease) =>
      (lease.expiresAt === null || lease.expiresAt > now) &&
      lease.createdAt.getTime() > now.getTime() - options.maxLeaseMs,
  );
  const reasons: WorkspaceLiveness["reasons"] = live.map((lease) => {
    const kind = lease.holder.startsWith("turn:")
      ? "turn"
      : lease.holder.startsWith("call:")
        ? "call"
        : "lease";
    const what =
      kind === "turn"
        ? "a chat turn is running"
        : kind === "call"
          ? "an API call is working on it"
          : `held by ${lease.holder}`;
    return { kind, text: `${what}${lease.reason ? ` (${lease.reason})` : ""}`, until: lease.expiresAt };
  });
  const lastWork = record.lastActivityAt ?? record.stateChangedAt;
  const idleUntil = new Date(lastWork.getTime() + options.idleTtlMs);
  if (idleUntil > now) {
    reasons.push({
      kind: "idle_timer",
      text: `last work ${Math.round((now.getTime() - lastWork.getTime()) / 1000)} s ago; the idle timer runs for ${Math.round(options.idleTtlMs / 1000)} s`,
      until: idleUntil,
    });
  }
  return { running: true, reasons, stopsAfter: live.length > 0 ? null : idleUntil };
}
