"use client";

import { useQuery } from "@tanstack/react-query";
import type { inferRouterOutputs } from "@trpc/server";
import { createContext, type ReactNode, useContext, useMemo, useState } from "react";
import { useTRPC } from "@/app/_trpc/client";
import type { AppRouter } from "@/server/api/root";

export type CheckpointItem = inferRouterOutputs<AppRouter>["checkpoint"]["list"][number];

type CheckpointsValue = {
  tenantSlug: string;
  sessionId: string;
  /** Each turn's checkpoint (READY or FAILED), by turn id. */
  byTurn: ReadonlyMap<string, CheckpointItem>;
  /** Why this user may not revert or fork here (null: they may). */
  changeRefusal: string | null;
  /** The revert this page started, or the fork's that opened it, followed until it ends (null: none). */
  restoreId: string | null;
  followRestore: (restoreId: string | null) => void;
};

const CheckpointsContext = createContext<CheckpointsValue | null>(null);

/**
 * The session's checkpoints for every turn of its history: one `checkpoint.list` for the page instead of a
 * query per message, and the revert in progress, which the banner above the chat follows and the dialogs
 * start (so it outlives the dialog that started it).
 */
export function CheckpointsProvider({
  tenantSlug,
  sessionId,
  changeRefusal,
  initialRestoreId,
  children,
}: {
  tenantSlug: string;
  sessionId: string;
  changeRefusal: string | null;
  initialRestoreId: string | null;
  children: ReactNode;
}) {
  const trpc = useTRPC();
  const list = useQuery(trpc.checkpoint.list.queryOptions({ tenantSlug, sessionId }));
  const [restoreId, followRestore] = useState<string | null>(initialRestoreId);
  const value = useMemo(
    () => ({
      tenantSlug,
      sessionId,
      byTurn: new Map(
        (list.data ?? []).flatMap((checkpoint) =>
          checkpoint.turnId === null ? [] : [[checkpoint.turnId, checkpoint] as const],
        ),
      ),
      changeRefusal,
      restoreId,
      followRestore,
    }),
    [tenantSlug, sessionId, list.data, changeRefusal, restoreId],
  );
  return <CheckpointsContext.Provider value={value}>{children}</CheckpointsContext.Provider>;
}

export function useCheckpoints(): CheckpointsValue {
  const value = useContext(CheckpointsContext);
  if (!value) throw new Error("useCheckpoints outside CheckpointsProvider");
  return value;
}
