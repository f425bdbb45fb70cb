"use client";

import { AlertTriangle, Ban } from "lucide-react";
import { cn } from "@/app/_components/ui/cn";
import type { ChatTurnSummaryDTO } from "@/server/modules/chat/chat.schema";
import { MessageText } from "./message-view";

/**
 * How each turn that did not complete ended, in the history: chat_messages hold only what was said, so a
 * failed, cancelled or interrupted turn would otherwise read like a normal (or missing) reply after a
 * reload. A turn's messages are stored when it ends, before the next turn starts: they are the messages
 * created between its start and the next turn's start, so its marker goes right after them.
 */
export type PlacedTurn = ChatTurnSummaryDTO & {
  /** The next turn's start (null for the last turn): the marker goes before the first message from then. */
  boundary: Date | null;
};

export function placeTurns(turns: readonly ChatTurnSummaryDTO[] | undefined): PlacedTurn[] {
  const placed: PlacedTurn[] = [];
  (turns ?? []).forEach((turn, index) => {
    if (turn.status === "COMPLETED" || turn.status === "RUNNING") return;
    placed.push({ ...turn, boundary: turns?.[index + 1]?.startedAt ?? null });
  });
  return placed;
}

/** The markers whose place is after a message created at `after` and before one created at `before`. */
export function markersBetween(turns: readonly PlacedTurn[], after: Date | null, before: Date | null) {
  return turns.filter(
    (turn) =>
      (after === null || turn.boundary === null || turn.boundary > after) &&
      (before === null ? true : turn.boundary !== null && turn.boundary <= before),
  );
}

const LABEL = {
  FAILED: "This turn failed",
  CANCELLED: "This turn was cancelled",
  INTERRUPTED: "This turn was interrupted",
};

/** One turn's end in the history. `lastMessageAt`: the message before it (did the turn store any?). */
export function TurnMarker({ turn, lastMessageAt }: { turn: PlacedTurn; lastMessageAt: Date | null }) {
  if (turn.status === "COMPLETED" || turn.status === "RUNNING") return null;
  const storedNothing = lastMessageAt === null || lastMessageAt < turn.startedAt;
  const failed = turn.status === "FAILED";
  return (
    <li
      className={cn(
        "ml-10 flex flex-col gap-1 rounded-lg border px-3 py-2 text-sm",
        failed ? "border-destructive/40 bg-destructive/5" : "border-amber-500/40 bg-amber-500/5",
      )}
      data-testid="turn-marker"
      data-status={turn.status.toLowerCase()}
    >
      <p className="flex items-start gap-1.5 font-medium">
        {failed ? (
          <AlertTriangle className="mt-0.5 size-3.5 shrink-0" />
        ) : (
          <Ban className="mt-0.5 size-3.5 shrink-0" />
        )}
        <span>
          {LABEL[turn.status]}
          {!failed && !storedNothing ? ": the reply above is partial" : ""}
          {turn.error ? <span data-testid="turn-marker-reason">{`: ${turn.error.message}`}</span> : null}
        </span>
      </p>
      {turn.error && (
        <p className="text-muted-foreground text-xs">{turn.error.code.toLowerCase().replace(/_/g, " ")}</p>
      )}
      {storedNothing && turn.userMessage && (
        <details className="text-xs">
          <summary className="text-muted-foreground cursor-pointer">The message it answered</summary>
          <MessageText text={turn.userMessage} />
        </details>
      )}
    </li>
  );
}
