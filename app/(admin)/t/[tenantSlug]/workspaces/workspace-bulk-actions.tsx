"use client";

import { useMutation, useQueryClient } from "@tanstack/react-query";
import type { inferRouterOutputs } from "@trpc/server";
import { Play, Square, Trash2 } from "lucide-react";
import { useState } from "react";
import { Alert } from "@/app/_components/ui/alert";
import { Button } from "@/app/_components/ui/button";
import { ConfirmDialog } from "@/app/_components/ui/confirm-dialog";
import { RenameButton, RenameDialog } from "@/app/_components/ui/rename-dialog";
import { useTRPC } from "@/app/_trpc/client";
import type { AppRouter } from "@/server/api/root";
import type { WorkspaceState } from "@/server/modules/workspace/workspace.types";

type BulkAnswer = inferRouterOutputs<AppRouter>["workspace"]["bulk"];
type WorkspaceAction = "stop" | "start" | "purge";
type Run = (action: WorkspaceAction, workspaceIds: string[], force?: boolean) => void;

const STARTABLE: readonly WorkspaceState[] = ["STOPPED", "FAILED", "PENDING"];
const DONE_TEXT: Record<WorkspaceAction, string> = {
  stop: "stop requested",
  start: "start requested",
  purge: "purge requested",
};

/**
 * Stop, start and purge for the workspaces list: one `workspace.bulk` call per action (each workspace its
 * own audited request and job), and the per-workspace outcome of the last one. The list updates itself as
 * the workers move the workspaces on (live changes), so nothing here polls.
 */
export function useWorkspaceActions(tenantSlug: string, onDone: () => void) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const [last, setLast] = useState<BulkAnswer | null>(null);
  const bulk = useMutation(
    trpc.workspace.bulk.mutationOptions({
      onSuccess: async (answer) => {
        setLast(answer);
        onDone();
        await queryClient.invalidateQueries(trpc.workspace.list.pathFilter());
      },
    }),
  );
  const run: Run = (action, workspaceIds, force = false) => {
    setLast(null);
    bulk.mutate({ tenantSlug, action, workspaceIds, force });
  };
  return { run, last, pending: bulk.isPending, error: bulk.error, dismiss: () => setLast(null) };
}

/** The toolbar over the selected rows; purge asks first. */
export function BulkActionBar({
  selected,
  run,
  pending,
}: {
  selected: { id: string; state: WorkspaceState }[];
  run: Run;
  pending: boolean;
}) {
  const [force, setForce] = useState(false);
  const ids = selected.map((workspace) => workspace.id);
  if (ids.length === 0) return null;
  return (
    <div
      className="bg-muted/50 flex flex-wrap items-center gap-2 border-b px-4 py-2 text-sm"
      data-testid="bulk-bar"
    >
      <span className="font-medium">{ids.length} selected</span>
      <Button size="sm" variant="outline" disabled={pending} onClick={() => run("stop", ids, force)}>
        <Square /> Stop
      </Button>
      <Button size="sm" variant="outline" disabled={pending} onClick={() => run("start", ids)}>
        <Play /> Start
      </Button>
      <ConfirmDialog
        trigger={
          <Button size="sm" variant="destructive" disabled={pending}>
            <Trash2 /> Purge…
          </Button>
        }
        title={`Purge ${ids.length} workspace${ids.length === 1 ? "" : "s"}?`}
        description={
          "Each one's current generation is deleted for good: files, skills, MCP declarations and offloaded " +
          "data. Their sessions keep working: the next use starts a fresh, empty generation.\n\n" +
          ids.join("\n")
        }
        confirmLabel="Purge"
        onConfirm={() => run("purge", ids, force)}
      />
      <label className="ml-2 flex items-center gap-2 text-xs">
        <input type="checkbox" checked={force} onChange={(event) => setForce(event.target.checked)} />
        Even if in use (active leases)
      </label>
    </div>
  );
}

/** What the last action did to each workspace it named. */
export function BulkOutcomes({
  answer,
  error,
  onDismiss,
}: {
  answer: BulkAnswer | null;
  error: { message: string } | null;
  onDismiss: () => void;
}) {
  if (error) return <Alert className="m-4">{error.message}</Alert>;
  if (!answer) return null;
  const failed = answer.results.filter((result) => !result.ok).length;
  return (
    <Alert
      tone={failed > 0 ? "error" : "success"}
      className="m-4"
      data-testid="bulk-outcomes"
      data-failed={failed}
    >
      <div className="flex items-start justify-between gap-4">
        <ul className="grid gap-0.5">
          {answer.results.map((result) => (
            <li
              key={result.workspaceId}
              data-testid="bulk-outcome"
              data-workspace-id={result.workspaceId}
              data-ok={result.ok}
            >
              <span className="font-mono text-xs">{result.workspaceId}</span>:{" "}
              {result.ok
                ? result.jobId
                  ? DONE_TEXT[answer.action]
                  : `nothing to do (${(result.state ?? "").toLowerCase()})`
                : result.error?.message}
            </li>
          ))}
        </ul>
        <Button size="sm" variant="ghost" onClick={onDismiss}>
          Dismiss
        </Button>
      </div>
    </Alert>
  );
}

/** One row's actions: the one its state allows (stop or start), purge (asked first) and rename. */
export function RowActions({
  workspace,
  run,
  pending,
  onRename,
}: {
  workspace: { id: string; state: WorkspaceState; label: string | null };
  run: Run;
  pending: boolean;
  /** Opens the table's rename dialog for this row. */
  onRename: (workspace: { id: string; label: string | null }) => void;
}) {
  const gone = workspace.state === "PURGED" || workspace.state === "PURGING";
  return (
    <div className="flex items-center justify-end gap-1">
      {workspace.state === "READY" && (
        <Button
          size="icon-sm"
          variant="ghost"
          title="Stop"
          aria-label={`Stop ${workspace.id}`}
          disabled={pending}
          onClick={() => run("stop", [workspace.id])}
        >
          <Square />
        </Button>
      )}
      {STARTABLE.includes(workspace.state) && (
        <Button
          size="icon-sm"
          variant="ghost"
          title="Start"
          aria-label={`Start ${workspace.id}`}
          disabled={pending}
          onClick={() => run("start", [workspace.id])}
        >
          <Play />
        </Button>
      )}
      <RenameButton ariaLabel={`Rename ${workspace.id}`} onClick={() => onRename(workspace)} />
      {!gone && (
        <ConfirmDialog
          trigger={
            <Button
              size="icon-sm"
              variant="ghost"
              title="Purge…"
              aria-label={`Purge ${workspace.id}`}
              disabled={pending}
            >
              <Trash2 />
            </Button>
          }
          title={`Purge ${workspace.label ?? workspace.id}?`}
          description="Its current generation is deleted for good: files, skills, MCP declarations and offloaded data. Its sessions keep working: the next use starts a fresh, empty generation."
          confirmLabel="Purge"
          onConfirm={() => run("purge", [workspace.id])}
        />
      )}
    </div>
  );
}

/**
 * The workspace rename dialog of the list: one for the whole table, opened for a row (`workspace`), so a live
 * update that re-renders the rows cannot close it.
 */
export function WorkspaceRenameDialog({
  tenantSlug,
  workspace,
  onClose,
}: {
  tenantSlug: string;
  workspace: { id: string; label: string | null } | null;
  onClose: () => void;
}) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const rename = useMutation(
    trpc.workspace.setLabel.mutationOptions({
      onSuccess: () => queryClient.invalidateQueries(trpc.workspace.list.pathFilter()),
    }),
  );
  return (
    <RenameDialog
      open={workspace !== null}
      onOpenChange={(open) => {
        if (!open) onClose();
      }}
      title="Name this workspace"
      description={`A name shown in the list instead of its id (${workspace?.id ?? ""}). Leave it empty to clear it.`}
      formLabel={`Rename ${workspace?.id ?? ""}`}
      // Keyed by the workspace: the field starts from this one's name, not the last one's.
      key={workspace?.id ?? "none"}
      current={workspace?.label ?? ""}
      maxLength={100}
      save={(name) =>
        rename.mutateAsync({ tenantSlug, workspaceId: workspace!.id, label: name === "" ? null : name })
      }
    />
  );
}
