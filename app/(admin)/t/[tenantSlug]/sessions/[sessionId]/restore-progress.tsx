"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { Loader2, X } from "lucide-react";
import { useEffect, useRef } from "react";
import { toast } from "sonner";
import { Alert } from "@/app/_components/ui/alert";
import { Button } from "@/app/_components/ui/button";
import { useTRPC } from "@/app/_trpc/client";
import { useOneAtATime } from "./checkpoint-actions";
import { useCheckpoints } from "./checkpoint-context";

/** How often a running revert is read again: the workers write the files, usually within seconds. */
const POLL_MS = 1_000;

/** What the banner says of a restore, by kind: a revert of this session, or the filling of a fork's workspace. */
const WORDS = {
  REVERT: {
    running: "Reverting the workspace to the chosen turn… New messages wait until it is done.",
    done: "Reverted:",
    doneAfter: "The later turns are marked reverted and kept below.",
    toast: "Reverted: the workspace is back to that turn.",
    failed: "The revert failed:",
    failedAfter: "The workspace and turns are as they were.",
  },
  FORK: {
    running: "Filling this fork's workspace with the checkpoint's files… New messages wait until it is done.",
    done: "The fork's workspace is ready:",
    doneAfter: "",
    // The fork's own toast ("Forked: …") was just shown; the banner says the rest.
    toast: null,
    failed: "Filling the fork's workspace failed:",
    failedAfter: "Its workspace may lack the checkpoint's files.",
  },
} as const;

/**
 * The restore this page follows (a revert it started, or the fork's that opened it), read from
 * `checkpoint.restore` until the workers end it. At the end the history, turns and checkpoints are read
 * again, so a revert's later turns show as reverted.
 */
export function RestoreProgress() {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const { tenantSlug, restoreId, followRestore } = useCheckpoints();
  const restore = useQuery({
    ...trpc.checkpoint.restore.queryOptions({ tenantSlug, restoreId: restoreId ?? "" }),
    enabled: restoreId !== null,
    refetchInterval: (query) => (query.state.data?.status === "RUNNING" ? POLL_MS : false),
  });
  const status = restore.data?.status;
  // The end is announced once per restore, not on every render after it.
  const announced = useRef<string | null>(null);
  useEffect(() => {
    if (!restoreId || !status || status === "RUNNING" || announced.current === restoreId) return;
    announced.current = restoreId;
    const done = WORDS[restore.data?.kind ?? "REVERT"].toast;
    if (status === "DONE" && done) toast.success(done);
    void Promise.all([
      queryClient.invalidateQueries({ queryKey: trpc.chat.pathKey() }),
      queryClient.invalidateQueries({ queryKey: trpc.checkpoint.list.pathKey() }),
      queryClient.invalidateQueries({ queryKey: trpc.session.pathKey() }),
    ]);
  }, [restoreId, status, restore.data?.kind, queryClient, trpc]);

  if (!restoreId) return null;
  const dismiss = (
    <Button
      variant="ghost"
      size="sm"
      className="ml-auto h-6 px-1"
      aria-label="Dismiss"
      onClick={() => followRestore(null)}
    >
      <X />
    </Button>
  );
  // Before the first answer the kind is unknown: the running line says only what both kinds do.
  const words = WORDS[restore.data?.kind ?? "REVERT"];
  const running = restore.data ? words.running : "Restoring the workspace from a checkpoint…";
  if (restore.error) {
    return (
      <Alert className="mb-4" data-testid="restore-progress" data-status="unknown">
        <span className="flex items-start gap-2">
          Could not read the progress: {restore.error.message} {dismiss}
        </span>
      </Alert>
    );
  }
  if (!restore.data || status === "RUNNING") {
    return (
      <Alert tone="info" className="mb-4" data-testid="restore-progress" data-status="running">
        <span className="inline-flex items-center gap-2">
          <Loader2 className="size-3.5 animate-spin" /> {running}
          {restore.data && restore.data.toWrite > 0 ? (
            <span className="tabular-nums" data-testid="restore-count">
              {restore.data.written} of {restore.data.toWrite} files
            </span>
          ) : null}
        </span>
      </Alert>
    );
  }
  if (restore.data.status === "FAILED") {
    return (
      <Alert className="mb-4" data-testid="restore-progress" data-status="failed">
        <span className="flex items-start gap-2">
          {words.failed} {restore.data.error ?? "no reason given"}. {words.failedAfter} {dismiss}
        </span>
      </Alert>
    );
  }
  return (
    <Alert tone="success" className="mb-4" data-testid="restore-progress" data-status="done">
      <span className="flex items-start gap-2">
        {words.done} {restore.data.written} file{restore.data.written === 1 ? "" : "s"} written,{" "}
        {restore.data.deleted} deleted. {words.doneAfter}
        {restore.data.kind === "REVERT" && restore.data.safetyCheckpointId ? (
          <UndoRevert checkpointId={restore.data.safetyCheckpointId} />
        ) : null}
        {dismiss}
      </span>
    </Alert>
  );
}

/**
 * Every revert first records the folder as it was (a BEFORE_REVERT checkpoint): reverting to that one
 * undoes the revert, files and turns alike. One call for a double click.
 */
function UndoRevert({ checkpointId }: { checkpointId: string }) {
  const trpc = useTRPC();
  const { tenantSlug, sessionId, changeRefusal, followRestore } = useCheckpoints();
  const once = useOneAtATime();
  const undo = useMutation(
    trpc.checkpoint.revert.mutationOptions({
      onSuccess: ({ restoreId }) => followRestore(restoreId),
      onError: (error) => toast.error(`Could not undo the revert: ${error.message}`),
    }),
  );
  if (changeRefusal) return null;
  return (
    <Button
      variant="outline"
      size="sm"
      className="h-6 px-2"
      disabled={undo.isPending}
      onClick={() =>
        void once(() => undo.mutateAsync({ tenantSlug, sessionId, checkpointId }).catch(() => {}))
      }
    >
      Undo revert
    </Button>
  );
}
