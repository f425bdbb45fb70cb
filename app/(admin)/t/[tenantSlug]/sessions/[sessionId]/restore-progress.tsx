"use client";

import { useQuery, useQueryClient } from "@tanstack/react-query";
import { Loader2, X } from "lucide-react";
import { useEffect, useRef } from "react";
import { toast } from "sonner";
import { Alert } from "@/app/_components/ui/alert";
import { Button } from "@/app/_components/ui/button";
import { useTRPC } from "@/app/_trpc/client";
import { useCheckpoints } from "./checkpoint-context";

/** How often a running revert is read again: the workers write the files, usually within seconds. */
const POLL_MS = 1_000;

/**
 * The revert this page started, read from `checkpoint.restore` until the workers end it. When it is DONE
 * the history, turns and checkpoints are read again, so the later turns show as reverted.
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
    if (status === "DONE") toast.success("Reverted: the workspace is back to that turn.");
    void Promise.all([
      queryClient.invalidateQueries({ queryKey: trpc.chat.pathKey() }),
      queryClient.invalidateQueries({ queryKey: trpc.checkpoint.list.pathKey() }),
      queryClient.invalidateQueries({ queryKey: trpc.session.pathKey() }),
    ]);
  }, [restoreId, status, queryClient, trpc]);

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
  if (restore.error) {
    return (
      <Alert className="mb-4" data-testid="restore-progress" data-status="unknown">
        <span className="flex items-start gap-2">
          Could not read the revert&apos;s progress: {restore.error.message} {dismiss}
        </span>
      </Alert>
    );
  }
  if (!restore.data || status === "RUNNING") {
    return (
      <Alert tone="info" className="mb-4" data-testid="restore-progress" data-status="running">
        <span className="inline-flex items-center gap-2">
          <Loader2 className="size-3.5 animate-spin" /> Reverting the workspace to the chosen turn… New
          messages wait until it is done.
        </span>
      </Alert>
    );
  }
  if (restore.data.status === "FAILED") {
    return (
      <Alert className="mb-4" data-testid="restore-progress" data-status="failed">
        <span className="flex items-start gap-2">
          The revert failed: {restore.data.error ?? "no reason given"}. The workspace and turns are as they
          were. {dismiss}
        </span>
      </Alert>
    );
  }
  return (
    <Alert tone="success" className="mb-4" data-testid="restore-progress" data-status="done">
      <span className="flex items-start gap-2">
        Reverted: {restore.data.written} file{restore.data.written === 1 ? "" : "s"} written,{" "}
        {restore.data.deleted} deleted. The later turns are marked reverted and kept below. {dismiss}
      </span>
    </Alert>
  );
}
