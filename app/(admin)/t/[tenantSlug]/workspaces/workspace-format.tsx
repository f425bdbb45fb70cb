import { Badge, type BadgeTone } from "@/app/_components/ui/badge";
import { Tooltip } from "@/app/_components/ui/tooltip";
import type { WorkspaceEventKind, WorkspaceState } from "@/server/modules/workspace/workspace.types";

/** Badge colour per lifecycle state: live is green, on its way is blue/amber, broken is red, gone is grey. */
const STATE_TONE: Record<WorkspaceState, BadgeTone> = {
  PENDING: "info",
  PROVISIONING: "info",
  READY: "success",
  STOPPING: "warning",
  STOPPED: "neutral",
  PURGING: "warning",
  PURGED: "outline",
  FAILED: "danger",
};

// Type-only imports above (the client bundle takes no server module); the Records keep these lists complete.
/** Every state, in lifecycle order. */
export const WORKSPACE_STATE_LIST = Object.keys(STATE_TONE) as WorkspaceState[];

/** Every ledger event kind, and whether it is a state change. */
const EVENT_KINDS: Record<WorkspaceEventKind, { transition: boolean }> = {
  created: { transition: false },
  provisioning: { transition: true },
  provisioned: { transition: true },
  bumped: { transition: false },
  stopping: { transition: true },
  stopped: { transition: true },
  purging: { transition: true },
  purged: { transition: true },
  failed: { transition: true },
  lease_acquired: { transition: false },
  lease_released: { transition: false },
  data_lost: { transition: false },
  integrity_checked: { transition: false },
};
export const EVENT_KIND_LIST = Object.keys(EVENT_KINDS) as WorkspaceEventKind[];
export const TRANSITION_KIND_LIST = EVENT_KIND_LIST.filter((kind) => EVENT_KINDS[kind].transition);

/** What the events tab and its filter call a kind: the stored name, except where it needs saying plainly. */
export function eventKindLabel(kind: WorkspaceEventKind): string {
  if (kind === "data_lost") return "data lost";
  return kind === "integrity_checked" ? "files checked" : kind;
}

/**
 * An event's kind as the events tab shows it. `data_lost` (the machine vanished behind Berth's back, its
 * files are gone) is a red badge: the one entry an admin must not miss.
 */
export function EventKindLabel({ kind }: { kind: WorkspaceEventKind }) {
  if (kind === "data_lost") {
    return (
      <Badge tone="danger" dot data-testid="event-data-lost">
        {eventKindLabel(kind)}
      </Badge>
    );
  }
  if (kind === "integrity_checked") {
    // Whether anything was lost is in the event's reason beside it; the badge says a check ran.
    return (
      <Badge tone="info" dot data-testid="event-integrity-checked">
        {eventKindLabel(kind)}
      </Badge>
    );
  }
  return <code className="text-xs">{kind}</code>;
}

/** States a worker is about to move on from: pages poll while a workspace is in one of them. */
export const TRANSITIONAL_STATES: readonly WorkspaceState[] = [
  "PENDING",
  "PROVISIONING",
  "STOPPING",
  "PURGING",
];

export function WorkspaceStateBadge({ state }: { state: WorkspaceState }) {
  return (
    <Badge tone={STATE_TONE[state]} dot data-testid="workspace-state">
      {state.toLowerCase()}
    </Badge>
  );
}

export function BackendLabel({ kind, trustedOnly }: { kind: string; trustedOnly: boolean }) {
  return (
    <span className="inline-flex items-center gap-1.5">
      <code className="text-xs">{kind}</code>
      {trustedOnly && (
        <Tooltip content="Runs agent commands on the host with Berth's privileges: for trusted agents only.">
          <span>
            <Badge tone="warning">trusted only</Badge>
          </span>
        </Tooltip>
      )}
    </span>
  );
}

/** "3 min", "2 h 5 min", "4 d 1 h": enough to judge idleness at a glance. */
export function formatDuration(ms: number | null): string {
  if (ms === null) return "—";
  const minutes = Math.floor(ms / 60_000);
  if (minutes < 1) return `${Math.floor(ms / 1000)} s`;
  if (minutes < 60) return `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  if (hours < 24) return `${hours} h ${minutes % 60} min`;
  return `${Math.floor(hours / 24)} d ${hours % 24} h`;
}
