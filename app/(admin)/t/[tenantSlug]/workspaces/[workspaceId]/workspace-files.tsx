"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { ChevronRight, File, Folder, FolderPlus, Trash2, Upload } from "lucide-react";
import { type FormEvent, useRef, useState } from "react";
import { toast } from "sonner";
import { Alert } from "@/app/_components/ui/alert";
import { Button } from "@/app/_components/ui/button";
import { Card } from "@/app/_components/ui/card";
import { ConfirmDialog } from "@/app/_components/ui/confirm-dialog";
import {
  Dialog,
  DialogContent,
  DialogDescription,
  DialogFooter,
  DialogHeader,
  DialogTitle,
} from "@/app/_components/ui/dialog";
import { EmptyState } from "@/app/_components/ui/empty-state";
import { Field } from "@/app/_components/ui/field";
import { Input } from "@/app/_components/ui/input";
import { Progress } from "@/app/_components/ui/progress";
import { RelativeTime } from "@/app/_components/ui/relative-time";
import { Skeleton } from "@/app/_components/ui/skeleton";
import { Table, TableBody, TableCell, TableHead, TableHeader, TableRow } from "@/app/_components/ui/table";
import { useTRPC } from "@/app/_trpc/client";
import { useTenantRole } from "../../_components/tenant-role";
import { FileViewer } from "./file-viewer";
import { ReplaceFilesDialog } from "./replace-files-dialog";
import { formatBytes, postWithProgress, UploadError, workspaceRoute } from "./upload";
import { resetErrorOnEdit } from "@/app/_components/ui/use-submit-once";

const childPath = (dir: string, name: string) => (dir === "." || dir === "" ? name : `${dir}/${name}`);

type UploadState = { name: string; fraction: number };

// The server's rule (server/modules/workspace-content/workspace-files.service.ts), so the page does not offer what it
// would refuse: the layout folders stay, `.mcp` and `skills/` are changed in their own tabs.
const LAYOUT = new Set([".mcp", "skills", "data", "sessions", "skills/.seed"]);
const inSkills = (path: string) => path === "skills" || path.startsWith("skills/");
const isManaged = (path: string) => LAYOUT.has(path) || inSkills(path);

/**
 * The workdir as the agent sees it: walk folders, open a file (view, edit text in place, download), upload
 * files (streamed, one request each, with progress), make a folder, delete (confirmed). Changing needs the
 * member role; `.mcp` and `skills/` are changed in their own tabs (the server refuses them here).
 */
export function WorkspaceFiles({ tenantSlug, workspaceId }: { tenantSlug: string; workspaceId: string }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const { role, can } = useTenantRole(tenantSlug);
  const canChange = can("session:use", false);
  const [dir, setDir] = useState(".");
  const [openFile, setOpenFile] = useState<string | null>(null);
  const [uploads, setUploads] = useState<UploadState[]>([]);
  // Files of the last upload that already exist in the folder: Replace uploads them again, overwriting.
  const [conflicts, setConflicts] = useState<{ base: string; files: File[] } | null>(null);
  const [newFolder, setNewFolder] = useState(false);
  const fileInput = useRef<HTMLInputElement>(null);

  const listInput = { tenantSlug, workspaceId, path: dir };
  const listing = useQuery(trpc.workspace.files.list.queryOptions(listInput));
  const refresh = () =>
    queryClient.invalidateQueries({ queryKey: trpc.workspace.files.list.queryKey(listInput) });
  const remove = useMutation(
    trpc.workspace.files.delete.mutationOptions({
      onSuccess: async (result, input) => {
        toast.success(`Deleted ${result.path}${result.wasDir ? "/" : ""}.`);
        if (openFile === input.path) setOpenFile(null);
        await refresh();
      },
      onError: (error) => toast.error(error.message),
    }),
  );
  const mkdir = useMutation(
    trpc.workspace.files.mkdir.mutationOptions({
      onSuccess: async (result) => {
        toast.success(`Made ${result.path}/.`);
        setNewFolder(false);
        await refresh();
      },
    }),
  );

  const enter = (path: string) => {
    setDir(path);
    setOpenFile(null);
  };

  /** Uploads one after the other; files that already exist are kept aside for the Replace question. */
  async function uploadFiles(files: File[], options: { overwrite?: boolean; base?: string } = {}) {
    const base = options.base ?? listing.data?.path ?? dir;
    setUploads(files.map((file) => ({ name: file.name, fraction: 0 })));
    let done = 0;
    const existing: File[] = [];
    for (const [index, file] of files.entries()) {
      try {
        await postWithProgress(
          workspaceRoute(workspaceId, "files", {
            tenantSlug,
            path: childPath(base, file.name),
            overwrite: options.overwrite ? "true" : null,
          }),
          file,
          {
            contentType: "application/octet-stream",
            onProgress: (fraction) =>
              setUploads((current) => current.map((item, i) => (i === index ? { ...item, fraction } : item))),
          },
        );
        done++;
      } catch (error) {
        if (error instanceof UploadError && error.status === 409 && !options.overwrite) existing.push(file);
        else toast.error(`${file.name}: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
    setUploads([]);
    if (fileInput.current) fileInput.current.value = "";
    if (done > 0) toast.success(done === 1 ? `Uploaded ${files[0]!.name}.` : `Uploaded ${done} files.`);
    if (existing.length > 0) setConflicts({ base, files: existing });
    await refresh();
  }

  const submitFolder = (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const value = new FormData(event.currentTarget).get("name");
    const name = typeof value === "string" ? value.trim() : "";
    if (name) mkdir.mutate({ tenantSlug, workspaceId, path: childPath(listing.data?.path ?? dir, name) });
  };

  const current = listing.data?.path ?? dir;
  const segments = current === "." ? [] : current.split("/");
  // Nothing can be added under skills/ here (the Skills tab installs skills).
  const canAdd = canChange && !inSkills(current);
  const addHint = inSkills(current) ? "Skills are added in the Skills tab." : undefined;

  return (
    <Card>
      <div className="flex flex-wrap items-center gap-2 border-b px-5 py-3">
        <nav
          aria-label="Folder"
          className="flex min-w-0 flex-1 flex-wrap items-center gap-0.5 text-sm"
          data-testid="files-path"
        >
          <button type="button" className="hover:underline font-medium" onClick={() => enter(".")}>
            workdir
          </button>
          {segments.map((segment, index) => (
            <span key={index} className="inline-flex items-center gap-0.5">
              <ChevronRight className="text-muted-foreground size-3.5" />
              <button
                type="button"
                className="font-mono text-xs hover:underline"
                onClick={() => enter(segments.slice(0, index + 1).join("/"))}
              >
                {segment}
              </button>
            </span>
          ))}
        </nav>
        <input
          ref={fileInput}
          type="file"
          multiple
          className="sr-only"
          aria-label="Files to upload"
          disabled={!canAdd || uploads.length > 0}
          onChange={(event) => {
            const files = [...(event.target.files ?? [])];
            if (files.length > 0) void uploadFiles(files);
          }}
        />
        <Button
          variant="outline"
          size="sm"
          title={addHint}
          disabled={!canAdd || uploads.length > 0}
          onClick={() => fileInput.current?.click()}
        >
          <Upload /> Upload
        </Button>
        <Button
          variant="outline"
          size="sm"
          title={addHint}
          disabled={!canAdd}
          onClick={() => setNewFolder(true)}
        >
          <FolderPlus /> New folder
        </Button>
      </div>

      <ReplaceFilesDialog
        names={conflicts?.files.map((file) => file.name) ?? null}
        folder={conflicts?.base ?? dir}
        onKeep={() => setConflicts(null)}
        onReplace={() => {
          const pending = conflicts;
          setConflicts(null);
          if (pending) void uploadFiles(pending.files, { overwrite: true, base: pending.base });
        }}
      />
      {uploads.length > 0 && (
        <ul className="grid gap-2 border-b px-5 py-3" aria-label="Uploads" data-testid="file-uploads">
          {uploads.map((item, index) => (
            <li key={index} className="grid gap-1 text-xs">
              <span className="flex justify-between">
                <span className="font-mono">{item.name}</span>
                <span className="text-muted-foreground">{Math.round(item.fraction * 100)}%</span>
              </span>
              <Progress value={Math.round(item.fraction * 100)} aria-label={`Uploading ${item.name}`} />
            </li>
          ))}
        </ul>
      )}

      {listing.error ? (
        <div className="p-5">
          <Alert>{listing.error.message}</Alert>
        </div>
      ) : !listing.data ? (
        <div className="grid gap-2 p-5">
          <Skeleton className="h-5 w-full" />
          <Skeleton className="h-5 w-2/3" />
        </div>
      ) : listing.data.entries.length === 0 ? (
        <EmptyState icon={Folder} title="This folder is empty" />
      ) : (
        <Table aria-label="Files">
          <TableHeader>
            <TableRow className="hover:bg-transparent">
              <TableHead>Name</TableHead>
              <TableHead>Size</TableHead>
              <TableHead>Modified</TableHead>
              <TableHead>
                <span className="sr-only">Actions</span>
              </TableHead>
            </TableRow>
          </TableHeader>
          <TableBody>
            {listing.data.entries.map((entry) => {
              const path = childPath(listing.data.path, entry.name);
              return (
                <TableRow
                  key={entry.name}
                  data-testid="file-row"
                  data-selected={openFile === path || undefined}
                >
                  <TableCell>
                    <button
                      type="button"
                      className="inline-flex items-center gap-2 font-mono text-xs hover:underline"
                      onClick={() => (entry.isDir ? enter(path) : setOpenFile(path))}
                    >
                      {entry.isDir ? (
                        <Folder className="text-muted-foreground size-4" />
                      ) : (
                        <File className="text-muted-foreground size-4" />
                      )}
                      {entry.isDir ? `${entry.name}/` : entry.name}
                    </button>
                  </TableCell>
                  <TableCell className="text-muted-foreground text-xs">
                    {entry.isDir ? "" : formatBytes(entry.sizeBytes)}
                  </TableCell>
                  <TableCell className="text-xs">
                    <RelativeTime value={entry.updatedAt} fallback="" />
                  </TableCell>
                  <TableCell className="text-right">
                    {canChange && !isManaged(path) && (
                      <ConfirmDialog
                        title={`Delete ${entry.isDir ? `${entry.name}/` : entry.name}?`}
                        description={
                          entry.isDir
                            ? `The folder ${path}/ and everything in it are deleted from the workspace. This cannot be undone.`
                            : `${path} is deleted from the workspace. This cannot be undone.`
                        }
                        confirmLabel="Delete"
                        onConfirm={() =>
                          remove.mutateAsync({ tenantSlug, workspaceId, path }).catch(() => undefined)
                        }
                        trigger={
                          <Button variant="ghost" size="icon-sm" aria-label={`Delete ${entry.name}`}>
                            <Trash2 />
                          </Button>
                        }
                      />
                    )}
                  </TableCell>
                </TableRow>
              );
            })}
          </TableBody>
        </Table>
      )}

      {openFile !== null && (
        <FileViewer
          key={openFile}
          tenantSlug={tenantSlug}
          workspaceId={workspaceId}
          path={openFile}
          canChange={canChange}
          onClose={() => setOpenFile(null)}
          onSaved={() => void refresh()}
        />
      )}
      {!canChange && role && (
        <p className="text-muted-foreground border-t px-5 py-3 text-xs">
          Changing files needs the member role; you are {role}.
        </p>
      )}

      <Dialog open={newFolder} onOpenChange={(open) => (setNewFolder(open), mkdir.reset())}>
        <DialogContent>
          <form
            onSubmit={submitFolder}
            onChange={resetErrorOnEdit(mkdir)}
            className="grid gap-4"
            aria-label="New folder"
          >
            <DialogHeader>
              <DialogTitle>New folder</DialogTitle>
              <DialogDescription>
                In <code>{current === "." ? "the workdir" : `${current}/`}</code>.
              </DialogDescription>
            </DialogHeader>
            <Field label="Name" error={mkdir.error?.message ?? null}>
              <Input name="name" required autoFocus autoComplete="off" pattern="[^/]+" />
            </Field>
            <DialogFooter>
              <Button type="submit" disabled={mkdir.isPending}>
                {mkdir.isPending ? "Creating…" : "Create"}
              </Button>
            </DialogFooter>
          </form>
        </DialogContent>
      </Dialog>
    </Card>
  );
}
