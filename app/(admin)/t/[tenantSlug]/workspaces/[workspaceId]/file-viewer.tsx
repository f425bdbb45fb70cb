"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { Download, Pencil, Save, X } from "lucide-react";
import { useState } from "react";
import { toast } from "sonner";
import { Alert } from "@/app/_components/ui/alert";
import { Button } from "@/app/_components/ui/button";
import { Skeleton } from "@/app/_components/ui/skeleton";
import { Textarea } from "@/app/_components/ui/textarea";
import { useTRPC } from "@/app/_trpc/client";
import { formatBytes } from "./upload";

/** What the viewer shows of a file; the download link gives the whole of it. */
const PREVIEW_BYTES = 1024 * 1024;

/**
 * One file of the workspace: its text (the first MiB), editable in place when it is text and fits whole
 * (the server refuses binary files, files over 1 MiB, and saves of a copy older than the file), a download
 * through a link signed for that file for a minute (asked for when clicked, so it is never stale).
 */
export function FileViewer({
  tenantSlug,
  workspaceId,
  path,
  canChange,
  onClose,
  onSaved,
}: {
  tenantSlug: string;
  workspaceId: string;
  path: string;
  canChange: boolean;
  onClose: () => void;
  onSaved: () => void;
}) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const [draft, setDraft] = useState<string | null>(null);
  const readInput = { tenantSlug, workspaceId, path, maxBytes: PREVIEW_BYTES };
  const file = useQuery(trpc.workspace.files.read.queryOptions(readInput));
  const save = useMutation(
    trpc.workspace.files.write.mutationOptions({
      onSuccess: async () => {
        toast.success(`Saved ${path}.`);
        setDraft(null);
        await queryClient.invalidateQueries({ queryKey: trpc.workspace.files.read.queryKey(readInput) });
        onSaved();
      },
    }),
  );

  const download = async () => {
    try {
      const link = await queryClient.fetchQuery(
        trpc.workspace.files.downloadToken.queryOptions({ tenantSlug, workspaceId, path }, { staleTime: 0 }),
      );
      // `download=true`: served as an attachment under the file's own name, not shown in the tab.
      window.location.assign(`${link.url}&download=true`);
    } catch (error) {
      toast.error(error instanceof Error ? error.message : String(error));
    }
  };

  const data = file.data;
  return (
    <div className="border-t" data-testid="file-preview">
      <div className="flex flex-wrap items-center gap-2 px-5 py-3">
        <code className="min-w-0 flex-1 truncate text-sm font-medium" title={path}>
          {path}
        </code>
        {data && <span className="text-muted-foreground text-xs">{formatBytes(data.sizeBytes)}</span>}
        {draft === null ? (
          <>
            {canChange && data?.editable && (
              <Button variant="outline" size="sm" onClick={() => setDraft(data.content)}>
                <Pencil /> Edit
              </Button>
            )}
            <Button variant="outline" size="sm" onClick={() => void download()}>
              <Download /> Download
            </Button>
            <Button variant="ghost" size="icon-sm" aria-label="Close file" onClick={onClose}>
              <X />
            </Button>
          </>
        ) : (
          <>
            <Button
              size="sm"
              disabled={save.isPending}
              onClick={() =>
                save.mutate({
                  tenantSlug,
                  workspaceId,
                  path,
                  content: draft,
                  ...(data ? { expectedUpdatedAt: data.updatedAt } : {}),
                })
              }
            >
              <Save /> {save.isPending ? "Saving…" : "Save"}
            </Button>
            <Button
              variant="outline"
              size="sm"
              onClick={() => {
                setDraft(null);
                save.reset();
              }}
            >
              Cancel
            </Button>
          </>
        )}
      </div>
      <div className="px-5 pb-5">
        {save.error && <Alert className="mb-3">{save.error.message}</Alert>}
        {file.error ? (
          <Alert>{file.error.message}</Alert>
        ) : !data ? (
          <Skeleton className="h-24 w-full" />
        ) : draft !== null ? (
          <Textarea
            aria-label={`Contents of ${path}`}
            value={draft}
            onChange={(event) => setDraft(event.target.value)}
            spellCheck={false}
            className="max-h-[60vh] min-h-64 font-mono text-xs"
          />
        ) : data.binary ? (
          <p className="text-muted-foreground text-sm" data-testid="file-binary">
            Binary file, {formatBytes(data.sizeBytes)}: download it to open it.
          </p>
        ) : (
          <>
            <pre
              className="bg-muted/40 max-h-[60vh] overflow-auto rounded-md border p-3 font-mono text-xs whitespace-pre-wrap"
              data-testid="file-content"
            >
              {data.content || <span className="text-muted-foreground">(empty)</span>}
            </pre>
            {data.truncated && (
              <p className="text-muted-foreground mt-2 text-xs">
                The first {formatBytes(PREVIEW_BYTES)} of {formatBytes(data.sizeBytes)}: download it for the
                rest.
              </p>
            )}
            {canChange && !data.editable && !data.truncated && (
              <p className="text-muted-foreground mt-2 text-xs">Too large to edit here.</p>
            )}
          </>
        )}
      </div>
    </div>
  );
}
