"use client";

import { useMutation, useQueryClient } from "@tanstack/react-query";
import { Plug, Upload } from "lucide-react";
import { type FormEvent, useState } from "react";
import { toast } from "sonner";
import { Alert } from "@/app/_components/ui/alert";
import { Button } from "@/app/_components/ui/button";
import {
  Dialog,
  DialogContent,
  DialogDescription,
  DialogFooter,
  DialogHeader,
  DialogTitle,
  DialogTrigger,
} from "@/app/_components/ui/dialog";
import { Field } from "@/app/_components/ui/field";
import { formString } from "@/app/_components/ui/form-data";
import { Input } from "@/app/_components/ui/input";
import { Textarea } from "@/app/_components/ui/textarea";
import { useTRPC } from "@/app/_trpc/client";
import { McpDeclarationDialog } from "../_components/mcp-declaration-dialog";
import { useTenantRole } from "../_components/tenant-role";
import { useSubmitOnce } from "@/app/_components/ui/use-submit-once";

/** The archive's media type from its name: what the upload route takes as a raw archive body. */
function archiveMediaType(name: string): string | null {
  const lower = name.toLowerCase();
  if (lower.endsWith(".zip")) return "application/zip";
  if (lower.endsWith(".tar")) return "application/x-tar";
  if (lower.endsWith(".tar.gz") || lower.endsWith(".tgz")) return "application/gzip";
  return null;
}

/**
 * POST /api/library/skills: a folder as the workspace upload sends it (a manifest of paths and sizes, then
 * the files in that order) or an archive as the raw body. The server checks it and stores it inline.
 */
async function uploadLibrarySkill(
  tenantSlug: string,
  description: string,
  source: { files: File[] } | { archive: File },
  idempotencyKey: string,
): Promise<{ name: string }> {
  const query = new URLSearchParams({ tenantSlug, idempotencyKey });
  if (description) query.set("description", description);
  let init: RequestInit;
  if ("files" in source) {
    const body = new FormData();
    const entries = source.files.map((file) => ({
      path: file.webkitRelativePath || file.name,
      size: file.size,
    }));
    body.append("manifest", JSON.stringify({ entries }));
    for (const file of source.files) body.append("files", file, file.webkitRelativePath || file.name);
    init = { body };
  } else {
    const mediaType = archiveMediaType(source.archive.name);
    if (!mediaType) throw new Error("Choose a .zip, .tar, .tar.gz or .tgz file.");
    init = { body: source.archive, headers: { "content-type": mediaType } };
  }
  const response = await fetch(`/api/library/skills?${query.toString()}`, { method: "POST", ...init });
  const answer = (await response.json().catch(() => null)) as
    ({ name: string } & { error?: { message?: string } }) | null;
  if (!response.ok) throw new Error(answer?.error?.message ?? `Upload failed (HTTP ${response.status})`);
  return answer as { name: string };
}

/** "Add MCP server" and "Upload skill", for admins (the API refuses anyone else anyway). */
export function LibraryHeaderActions({ tenantSlug }: { tenantSlug: string }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const { can } = useTenantRole(tenantSlug);
  const create = useMutation(trpc.library.create.mutationOptions());
  if (!can("library:manage", false)) return null;
  const refresh = () => queryClient.invalidateQueries({ queryKey: trpc.library.pathKey() });
  return (
    <>
      <McpDeclarationDialog
        title="Add an MCP server to the library"
        description="A declaration admins can then equip agents with, or install into a workspace."
        submitLabel="Add to library"
        withDescription
        trigger={
          <Button size="sm" variant="outline">
            <Plug /> Add MCP server
          </Button>
        }
        onAdd={async (declaration, description, idempotencyKey) => {
          await create.mutateAsync({ tenantSlug, kind: "MCP", declaration, description, idempotencyKey });
          toast.success(`${declaration.name} added to the library.`);
          await refresh();
        }}
      />
      <UploadSkillDialog tenantSlug={tenantSlug} onUploaded={refresh} />
    </>
  );
}

function UploadSkillDialog({ tenantSlug, onUploaded }: { tenantSlug: string; onUploaded: () => unknown }) {
  const [open, setOpen] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const submitOnce = useSubmitOnce();

  async function onSubmit(event: FormEvent<HTMLFormElement>, idempotencyKey: string) {
    event.preventDefault();
    const form = event.currentTarget;
    const folder = [...((form.elements.namedItem("folder") as HTMLInputElement | null)?.files ?? [])];
    const archive = (form.elements.namedItem("archive") as HTMLInputElement | null)?.files?.[0];
    const description = formString(new FormData(form), "description").trim();
    if (folder.length === 0 && !archive) return setError("Choose a folder or an archive.");
    setBusy(true);
    setError(null);
    try {
      const entry = await uploadLibrarySkill(
        tenantSlug,
        description,
        archive ? { archive } : { files: folder },
        idempotencyKey,
      );
      toast.success(`Skill ${entry.name} added to the library.`);
      await onUploaded();
      setOpen(false);
    } catch (failure) {
      setError(failure instanceof Error ? failure.message : String(failure));
    } finally {
      setBusy(false);
    }
  }

  return (
    <Dialog
      open={open}
      onOpenChange={(next) => {
        setOpen(next);
        setError(null);
      }}
    >
      <DialogTrigger asChild>
        <Button size="sm">
          <Upload /> Upload skill
        </Button>
      </DialogTrigger>
      <DialogContent>
        <DialogHeader>
          <DialogTitle>Upload a skill to the library</DialogTitle>
          <DialogDescription>
            A folder with a SKILL.md (name and description in its front matter), or a zip, tar or tar.gz of
            one. Stored as text: up to 50 text files of 256 KiB besides SKILL.md, no links.
          </DialogDescription>
        </DialogHeader>
        <form
          className="grid gap-4"
          onSubmit={(event) => {
            event.preventDefault();
            submitOnce((idempotencyKey) => onSubmit(event, idempotencyKey));
          }}
          aria-label="Upload skill"
        >
          <Field label="Folder">
            <Input name="folder" type="file" multiple {...{ webkitdirectory: "", directory: "" }} />
          </Field>
          <Field label="Archive" hint="Or one file: .zip, .tar, .tar.gz, .tgz. Used when both are chosen.">
            <Input name="archive" type="file" accept=".zip,.tar,.tgz,.gz" />
          </Field>
          <Field label="Description" hint="Optional: the skill's own description is used otherwise.">
            <Textarea name="description" rows={2} maxLength={2000} />
          </Field>
          {error && <Alert>{error}</Alert>}
          <DialogFooter>
            <Button type="submit" disabled={busy}>
              {busy ? "Uploading…" : "Upload"}
            </Button>
          </DialogFooter>
        </form>
      </DialogContent>
    </Dialog>
  );
}
