"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { BookOpen, Trash2, Upload } from "lucide-react";
import { type FormEvent, useState } from "react";
import { Alert } from "@/app/_components/ui/alert";
import { Button } from "@/app/_components/ui/button";
import { Card, CardContent, CardDescription, CardHeader, CardTitle } from "@/app/_components/ui/card";
import { ConfirmDialog } from "@/app/_components/ui/confirm-dialog";
import { EmptyState } from "@/app/_components/ui/empty-state";
import { Field } from "@/app/_components/ui/field";
import { Input } from "@/app/_components/ui/input";
import { Progress } from "@/app/_components/ui/progress";
import { RelativeTime } from "@/app/_components/ui/relative-time";
import { Select } from "@/app/_components/ui/select";
import { Skeleton } from "@/app/_components/ui/skeleton";
import { Table, TableBody, TableCell, TableHead, TableHeader, TableRow } from "@/app/_components/ui/table";
import { useTRPC } from "@/app/_trpc/client";
import { Notice, type NoticeMessage } from "../../_components/notice";
import { useTenantRole } from "../../_components/tenant-role";
import { postWithProgress, workspaceRoute } from "./upload";
import { useSubmitOnce } from "@/app/_components/ui/use-submit-once";

type UploadResult = { name: string; deduplicated?: boolean };

/** The archive's media type from its name: what the upload route takes as a raw archive body. */
function archiveMediaType(name: string): string | null {
  const lower = name.toLowerCase();
  if (lower.endsWith(".zip")) return "application/zip";
  if (lower.endsWith(".tar")) return "application/x-tar";
  if (lower.endsWith(".tar.gz") || lower.endsWith(".tgz")) return "application/gzip";
  return null;
}

/**
 * A folder as the skills route expects it: a `manifest` part listing every file's path and size, then the
 * files in that order (the server re-packs them as it reads and enforces the limits); an archive goes as
 * the raw body, typed by its extension.
 */
function skillBody(
  files: File[],
  archive: File | null,
): { body: XMLHttpRequestBodyInit; contentType?: string } {
  if (archive) {
    const mediaType = archiveMediaType(archive.name);
    if (!mediaType) throw new Error("Choose a .zip, .tar, .tar.gz or .tgz file.");
    return { body: archive, contentType: mediaType };
  }
  const entries = files.map((file) => ({ path: file.webkitRelativePath || file.name, size: file.size }));
  const form = new FormData();
  form.append("manifest", JSON.stringify({ entries }));
  for (const file of files) form.append("files", file, file.webkitRelativePath || file.name);
  return { body: form };
}

/**
 * The skills of one partition of the workspace (the workspace's agent, or the default one): what the agent
 * is told it can read, an upload of a folder or an archive with its progress, and removal (confirmed).
 * Changing skills needs members and up.
 */
export function WorkspaceSkills({
  tenantSlug,
  workspaceId,
  agentId,
  agentName,
}: {
  tenantSlug: string;
  workspaceId: string;
  agentId: string | null;
  agentName: string | null;
}) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const [partition, setPartition] = useState<string | null>(agentId);
  const [files, setFiles] = useState<File[]>([]);
  const [archive, setArchive] = useState<File | null>(null);
  const [progress, setProgress] = useState<number | null>(null);
  const [message, setMessage] = useState<NoticeMessage | null>(null);
  const { role, can } = useTenantRole(tenantSlug);
  const canChange = can("session:use", false);

  const target = { tenantSlug, workspaceId, agentId: partition };
  const skills = useQuery(trpc.workspace.skill.list.queryOptions(target));
  const refresh = () =>
    queryClient.invalidateQueries({ queryKey: trpc.workspace.skill.list.queryKey(target) });
  const remove = useMutation(
    trpc.workspace.skill.remove.mutationOptions({
      onSuccess: async (_result, input) => {
        setMessage({ kind: "success", text: `Removed ${input.dir ?? input.name}.` });
        await refresh();
      },
      onError: (error) => setMessage({ kind: "error", text: error.message }),
    }),
  );

  const submitOnce = useSubmitOnce();
  const upload = async (event: FormEvent<HTMLFormElement>, kind: "folder" | "archive") => {
    event.preventDefault();
    const form = event.currentTarget;
    setMessage(null);
    setProgress(0);
    try {
      const { body, contentType } = skillBody(
        kind === "folder" ? files : [],
        kind === "archive" ? archive : null,
      );
      const result = await postWithProgress<UploadResult>(
        workspaceRoute(workspaceId, "skills", { tenantSlug, agentId: partition }),
        body,
        { ...(contentType ? { contentType } : {}), onProgress: setProgress },
      );
      setMessage({
        kind: "success",
        text: result.deduplicated
          ? `The same skill is already installed as ${result.name}.`
          : `Installed ${result.name}.`,
      });
      setFiles([]);
      setArchive(null);
      form.reset();
      await refresh();
    } catch (error) {
      setMessage({ kind: "error", text: error instanceof Error ? error.message : String(error) });
    } finally {
      setProgress(null);
    }
  };
  const uploading = progress !== null;

  return (
    <div className="grid gap-5">
      <Card>
        <CardHeader>
          <div>
            <CardTitle>Skills</CardTitle>
            <CardDescription>What the agent is told it can read (SKILL.md front matter).</CardDescription>
          </div>
          {agentId && (
            <div className="w-64">
              <Select
                aria-label="Partition"
                value={partition ?? ""}
                onChange={(event) => setPartition(event.target.value === "" ? null : event.target.value)}
                className="[&_select]:h-8"
              >
                <option value={agentId}>Agent {agentName ?? agentId.slice(0, 8)}</option>
                <option value="">Default partition</option>
              </Select>
            </div>
          )}
        </CardHeader>
        {skills.error ? (
          <CardContent>
            <Alert>{skills.error.message}</Alert>
          </CardContent>
        ) : !skills.data ? (
          <CardContent>
            <Skeleton className="h-5 w-full" />
          </CardContent>
        ) : skills.data.length === 0 ? (
          <EmptyState icon={BookOpen} title="No skills in this partition" />
        ) : (
          <Table aria-label="Skills">
            <TableHeader>
              <TableRow className="hover:bg-transparent">
                <TableHead>Name</TableHead>
                <TableHead>Description</TableHead>
                <TableHead>Updated</TableHead>
                <TableHead>
                  <span className="sr-only">Actions</span>
                </TableHead>
              </TableRow>
            </TableHeader>
            <TableBody>
              {skills.data.map((skill) => (
                <TableRow key={skill.dir} data-testid="skill-row">
                  <TableCell className="font-mono text-xs">{skill.name}</TableCell>
                  <TableCell className="text-muted-foreground text-sm">{skill.description}</TableCell>
                  <TableCell className="text-xs">
                    <RelativeTime value={skill.updatedAt ? new Date(skill.updatedAt) : null} />
                  </TableCell>
                  <TableCell className="text-right">
                    <ConfirmDialog
                      title={`Remove the skill ${skill.name}?`}
                      description={`Its folder ${skill.dir} is deleted from this partition of the workspace.`}
                      confirmLabel="Remove"
                      // By folder: two skills may share a front-matter name, a folder is unique.
                      onConfirm={() =>
                        remove.mutateAsync({ ...target, dir: skill.dir }).catch(() => undefined)
                      }
                      trigger={
                        <Button variant="ghost" size="sm" disabled={!canChange || remove.isPending}>
                          <Trash2 /> Remove
                        </Button>
                      }
                    />
                  </TableCell>
                </TableRow>
              ))}
            </TableBody>
          </Table>
        )}
      </Card>

      <Card>
        <CardHeader>
          <div>
            <CardTitle>Add a skill</CardTitle>
            <CardDescription>
              A folder holding SKILL.md (up to 100 files, 50 MiB each), or a .zip, .tar or .tar.gz of one.
            </CardDescription>
          </div>
        </CardHeader>
        <CardContent className="grid gap-4 md:grid-cols-2">
          <form
            className="grid gap-3"
            aria-label="Upload a skill"
            onSubmit={(event) => {
              event.preventDefault();
              submitOnce(() => upload(event, "folder"));
            }}
          >
            <Field label="Skill folder (with SKILL.md)">
              <Input
                type="file"
                // A folder picker: every file comes with its path inside the chosen folder.
                {...{ webkitdirectory: "", directory: "" }}
                multiple
                disabled={!canChange || uploading}
                onChange={(event) => setFiles([...(event.target.files ?? [])])}
              />
            </Field>
            <Button type="submit" className="w-fit" disabled={!canChange || uploading || files.length === 0}>
              <Upload /> Upload folder
            </Button>
          </form>
          <form
            className="grid gap-3"
            aria-label="Skill archive"
            onSubmit={(event) => {
              event.preventDefault();
              submitOnce(() => upload(event, "archive"));
            }}
          >
            <Field label="Skill archive (.zip, .tar, .tar.gz)">
              <Input
                type="file"
                accept=".zip,.tar,.tar.gz,.tgz"
                disabled={!canChange || uploading}
                onChange={(event) => setArchive(event.target.files?.[0] ?? null)}
              />
            </Field>
            <Button type="submit" className="w-fit" disabled={!canChange || uploading || archive === null}>
              <Upload /> Send archive
            </Button>
          </form>
          {uploading && (
            <div className="grid gap-1 md:col-span-2" data-testid="skill-upload-progress">
              <span className="text-muted-foreground text-xs">
                {progress < 1 ? `Uploading… ${Math.round(progress * 100)}%` : "Installing…"}
              </span>
              <Progress value={Math.round(progress * 100)} aria-label="Skill upload" />
            </div>
          )}
          <div className="md:col-span-2">
            {!canChange && role && (
              <p className="text-muted-foreground text-xs">
                Changing skills needs the member role; you are {role}.
              </p>
            )}
            <Notice message={message} testId="skills-message" />
          </div>
        </CardContent>
      </Card>
    </div>
  );
}
