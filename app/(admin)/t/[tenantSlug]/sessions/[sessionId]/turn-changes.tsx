"use client";

import { useQuery } from "@tanstack/react-query";
import { AlertTriangle, FileDiff } from "lucide-react";
import { useState } from "react";
import { Alert } from "@/app/_components/ui/alert";
import { Badge } from "@/app/_components/ui/badge";
import { cn } from "@/app/_components/ui/cn";
import {
  Dialog,
  DialogContent,
  DialogDescription,
  DialogFooter,
  DialogHeader,
  DialogTitle,
  DialogTrigger,
} from "@/app/_components/ui/dialog";
import { Skeleton } from "@/app/_components/ui/skeleton";
import { useTRPC } from "@/app/_trpc/client";
import { ForkAction, RevertAction } from "./checkpoint-actions";
import { type CheckpointItem, useCheckpoints } from "./checkpoint-context";
import { FileDiffView } from "./file-diff-view";
import { formatBytes } from "./unified-diff";

/** The counts a turn's affordance shows: what it added, changed and removed (files and links). */
function Counts({ checkpoint }: { checkpoint: CheckpointItem }) {
  return (
    <span className="inline-flex gap-1.5 font-mono tabular-nums">
      <span className="text-success">+{checkpoint.added}</span>
      <span className="text-warning">~{checkpoint.changed}</span>
      <span className="text-destructive">−{checkpoint.removed}</span>
    </span>
  );
}

/**
 * Beside a turn: its checkpoint's counts, opening what the turn changed (its files, then one file's text
 * diff) with the actions from there: revert the session to it, fork a new session from it. Nothing for a
 * turn without a checkpoint (an older one, or one whose workspace was never used); a failed checkpoint says
 * so, since it cannot be restored.
 */
export function TurnChanges({ turnId }: { turnId: string }) {
  const { byTurn } = useCheckpoints();
  const [open, setOpen] = useState(false);
  const checkpoint = byTurn.get(turnId);
  if (!checkpoint) return null;
  if (checkpoint.status !== "READY") {
    return (
      <span
        className="text-muted-foreground inline-flex items-center gap-1"
        title={checkpoint.error ?? undefined}
        data-testid="turn-checkpoint-failed"
      >
        <AlertTriangle className="size-3" /> no checkpoint
      </span>
    );
  }
  const nothing = checkpoint.added + checkpoint.changed + checkpoint.removed === 0;
  return (
    <Dialog open={open} onOpenChange={setOpen}>
      <DialogTrigger asChild>
        <button
          type="button"
          className="hover:bg-accent inline-flex items-center gap-1 rounded-md border px-1.5 py-0.5 text-xs"
          aria-label={`Changes in this turn: ${checkpoint.added} added, ${checkpoint.changed} changed, ${checkpoint.removed} removed`}
          data-testid="turn-changes"
        >
          <FileDiff className="size-3" />
          {nothing ? <span>no changes</span> : <Counts checkpoint={checkpoint} />}
        </button>
      </DialogTrigger>
      {open && <ChangesDialog checkpoint={checkpoint} onClose={() => setOpen(false)} />}
    </Dialog>
  );
}

const KIND_LABEL = { added: "added", changed: "changed", removed: "removed" } as const;
const KIND_TONE = { added: "success", changed: "warning", removed: "danger" } as const;

function sizeText(file: { kind: string; sizeBefore: number | null; sizeAfter: number | null }) {
  const size = (value: number | null) => (value === null ? "?" : formatBytes(value));
  if (file.kind === "added") return size(file.sizeAfter);
  if (file.kind === "removed") return size(file.sizeBefore);
  return `${size(file.sizeBefore)} → ${size(file.sizeAfter)}`;
}

function ChangesDialog({ checkpoint, onClose }: { checkpoint: CheckpointItem; onClose: () => void }) {
  const trpc = useTRPC();
  const { tenantSlug, sessionId } = useCheckpoints();
  const diff = useQuery(
    trpc.checkpoint.diff.queryOptions({ tenantSlug, sessionId, checkpointId: checkpoint.id }),
  );
  const [selected, setSelected] = useState<string | null>(null);
  return (
    <DialogContent className="max-w-5xl" data-testid="turn-changes-dialog">
      <DialogHeader>
        <DialogTitle className="flex items-center gap-2">
          Changes in this turn <Counts checkpoint={checkpoint} />
        </DialogTitle>
        <DialogDescription>
          {checkpoint.turn?.message ? `“${checkpoint.turn.message}”. ` : ""}
          The workspace holds {checkpoint.files} file{checkpoint.files === 1 ? "" : "s"} (
          {formatBytes(checkpoint.totalBytes)}) after it.
          {checkpoint.turn?.reverted ? " This turn was reverted." : ""}
        </DialogDescription>
      </DialogHeader>
      {diff.error ? (
        <Alert>{diff.error.message}</Alert>
      ) : !diff.data ? (
        <Skeleton className="h-40 w-full" />
      ) : diff.data.files.length === 0 ? (
        <p className="text-muted-foreground text-sm">This turn changed no files.</p>
      ) : (
        <div className="grid min-h-0 gap-3 md:grid-cols-[18rem_1fr]">
          <ul className="max-h-[55vh] overflow-y-auto rounded-md border text-sm" aria-label="Changed files">
            {diff.data.files.map((file) => {
              const isFile = file.type === "file" || file.type === "symlink";
              return (
                <li key={file.path}>
                  <button
                    type="button"
                    disabled={!isFile}
                    aria-pressed={selected === file.path}
                    onClick={() => setSelected(file.path)}
                    className={cn(
                      "flex w-full items-center gap-2 px-2 py-1.5 text-left enabled:hover:bg-accent",
                      selected === file.path && "bg-accent",
                    )}
                    data-testid="changed-file"
                    data-kind={file.kind}
                  >
                    <Badge tone={KIND_TONE[file.kind]}>{KIND_LABEL[file.kind]}</Badge>
                    <span className="min-w-0 flex-1 truncate font-mono text-xs" title={file.path}>
                      {file.path}
                      {file.type === "dir" ? "/" : ""}
                    </span>
                    <span className="text-muted-foreground shrink-0 text-xs tabular-nums">
                      {file.type === "dir" ? "folder" : file.type === "symlink" ? "link" : sizeText(file)}
                    </span>
                  </button>
                </li>
              );
            })}
            {diff.data.truncated && (
              <li className="text-muted-foreground px-2 py-1.5 text-xs">
                …and {diff.data.total - diff.data.files.length} more
              </li>
            )}
          </ul>
          <div className="max-h-[55vh] min-w-0 overflow-y-auto rounded-md border">
            {selected ? (
              <FileDiffView key={selected} checkpointId={checkpoint.id} path={selected} />
            ) : (
              <p className="text-muted-foreground p-4 text-sm">Choose a file to see its changes.</p>
            )}
          </div>
        </div>
      )}
      <DialogFooter className="flex-wrap sm:justify-start">
        <RevertAction checkpointId={checkpoint.id} onStarted={onClose} />
        <ForkAction checkpointId={checkpoint.id} />
      </DialogFooter>
    </DialogContent>
  );
}
