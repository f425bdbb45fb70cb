"use client";

import { useQuery } from "@tanstack/react-query";
import { Alert } from "@/app/_components/ui/alert";
import { Button } from "@/app/_components/ui/button";
import { Skeleton } from "@/app/_components/ui/skeleton";
import { useTRPC } from "@/app/_trpc/client";
import { MessageView } from "./message-view";
import type { ChatContext } from "./tool-views";
import { markersBetween, type PlacedTurn, TurnMarker } from "./turn-markers";
import { TurnChanges } from "./turn-changes";

// A page of chat.history; the next page starts after the last message shown.
export const HISTORY_PAGE = 100;

/**
 * Where a history page starts: after this message (none: from the beginning). Its turn tells whether the
 * page's first message begins a turn or continues one from the page before.
 */
export type PageStart = { id: string; createdAt: Date; turnId: string | null } | undefined;

export function HistoryPage({
  ctx,
  sessionId,
  start,
  isLast,
  turns,
  onMore,
}: {
  ctx: ChatContext;
  sessionId: string;
  start: PageStart;
  isLast: boolean;
  /** The turns that did not complete, each marked after its messages. */
  turns: readonly PlacedTurn[];
  onMore: (last: NonNullable<PageStart>) => void;
}) {
  const afterId = start?.id;
  const trpc = useTRPC();
  const page = useQuery(
    trpc.chat.history.queryOptions({
      tenantSlug: ctx.tenantSlug,
      sessionId,
      limit: HISTORY_PAGE,
      ...(afterId ? { afterId } : {}),
    }),
  );
  if (page.error) {
    return (
      <li>
        <Alert>{page.error.message}</Alert>
      </li>
    );
  }
  if (!page.data) {
    return (
      <li className="grid gap-2">
        <Skeleton className="h-5 w-2/3" />
        <Skeleton className="h-5 w-1/2" />
      </li>
    );
  }
  const last = page.data.at(-1);
  let previousAt = start?.createdAt ?? null;
  let previousTurn = start?.turnId ?? null;
  return (
    <>
      {page.data.map((message) => {
        const before = previousAt;
        previousAt = message.createdAt;
        // A turn's changes go beside its first message (the user's), once.
        const startsTurn = message.turnId !== null && message.turnId !== previousTurn;
        previousTurn = message.turnId;
        return [
          ...markersBetween(turns, before, message.createdAt).map((turn) => (
            <TurnMarker key={turn.id} turn={turn} lastMessageAt={before} />
          )),
          <MessageView
            key={message.id}
            message={message}
            ctx={ctx}
            turnActions={startsTurn && message.turnId ? <TurnChanges turnId={message.turnId} /> : null}
          />,
        ];
      })}
      {isLast &&
        markersBetween(turns, previousAt, null).map((turn) => (
          <TurnMarker key={turn.id} turn={turn} lastMessageAt={previousAt} />
        ))}
      {isLast && last && page.data.length === HISTORY_PAGE && (
        <li className="flex justify-center">
          <Button variant="outline" size="sm" onClick={() => onMore(last)}>
            Load more messages
          </Button>
        </li>
      )}
    </>
  );
}
