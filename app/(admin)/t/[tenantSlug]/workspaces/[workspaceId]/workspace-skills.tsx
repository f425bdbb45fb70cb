"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import { useTRPC } from "@/app/_trpc/client";
import { Notice, type NoticeMessage } from "../../_components/notice";
import { useTenantRole } from "../../_components/tenant-role";
import { formatDate } from "../workspace-format";

type UploadResult = { name: string; deduplicated?: boolean };

/**
 * Uploads a skill folder the way the API expects it (POST /api/workspaces/:id/skills): a `manifest` part
 * listing every file's path and size, then the files in that order. The server streams them into the
 * workspace and enforces the limits; the browser only describes what it sends.
 */
type UploadTarget = { tenantSlug: string; workspaceId: string; agentId: string | null };

async function uploadSkillFolder(target: UploadTarget, files: File[]): Promise<UploadResult> {
  const entries = files.map((file) => ({ path: file.webkitRelativePath || file.name, size: file.size }));
  const body = new FormData();
  body.append("manifest", JSON.stringify({ entries }));
  for (const file of files) body.append("files", file, file.webkitRelativePath || file.name);
  return postSkill(target, { body });
}

/** The archive's media type from its name: what the upload route takes as a raw archive body. */
function archiveMediaType(name: string): string | null {
  const lower = name.toLowerCase();
  if (lower.endsWith(".zip")) return "application/zip";
  if (lower.endsWith(".tar")) return "application/x-tar";
  if (lower.endsWith(".tar.gz") || lower.endsWith(".tgz")) return "application/gzip";
  return null;
}

/** A zip, tar or tar.gz sent as it is (the server streams it into the workspace and checks it). */
async function uploadSkillArchive(target: UploadTarget, file: File): Promise<UploadResult> {
  const mediaType = archiveMediaType(file.name);
  if (!mediaType) throw new Error("Choose a .zip, .tar, .tar.gz or .tgz file.");
  return postSkill(target, { body: file, headers: { "content-type": mediaType } });
}

async function postSkill(target: UploadTarget, init: RequestInit): Promise<UploadResult> {
  const query = new URLSearchParams({ tenantSlug: target.tenantSlug });
  if (target.agentId) query.set("agentId", target.agentId);
  const response = await fetch(
    `/api/workspaces/${encodeURIComponent(target.workspaceId)}/skills?${query.toString()}`,
    { method: "POST", ...init },
  );
  const answer = (await response.json().catch(() => null)) as
    (UploadResult & { error?: { message?: string } }) | null;
  if (!response.ok) throw new Error(answer?.error?.message ?? `Upload failed (HTTP ${response.status})`);
  return answer as UploadResult;
}

/**
 * The skills of one partition of the workspace (the workspace's agent, or the default one): what the
 * agent is told it can read, an upload of a skill folder, and removal. Changing skills needs members and up.
 */
export function WorkspaceSkills({
  tenantSlug,
  workspaceId,
  agentId,
}: {
  tenantSlug: string;
  workspaceId: string;
  agentId: string | null;
}) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const [partition, setPartition] = useState<string | null>(agentId);
  const [files, setFiles] = useState<File[]>([]);
  const [archive, setArchive] = useState<File | null>(null);
  const [uploading, setUploading] = useState(false);
  const [message, setMessage] = useState<NoticeMessage | null>(null);

  const { role, can } = useTenantRole(tenantSlug);
  const canChange = can("session:use", false);

  const target = { tenantSlug, workspaceId, agentId: partition };
  const skills = useQuery(trpc.workspace.skill.list.queryOptions(target));
  const refresh = () =>
    queryClient.invalidateQueries({ queryKey: trpc.workspace.skill.list.queryKey(target) });
  const remove = useMutation(
    trpc.workspace.skill.remove.mutationOptions({
      onSuccess: () => void refresh(),
      onError: (error) => setMessage({ kind: "error", text: error.message }),
    }),
  );

  const upload = async (event: FormEvent, send: () => Promise<UploadResult>) => {
    event.preventDefault();
    setMessage(null);
    setUploading(true);
    try {
      const result = await send();
      setMessage({
        kind: "success",
        text: result.deduplicated
          ? `The same skill is already installed as ${result.name}.`
          : `Installed ${result.name}.`,
      });
      setFiles([]);
      setArchive(null);
      (event.target as HTMLFormElement).reset();
      await refresh();
    } catch (error) {
      setMessage({ kind: "error", text: error instanceof Error ? error.message : String(error) });
    } finally {
      setUploading(false);
    }
  };

  return (
    <section className="panel" aria-labelledby="skills-heading">
      <h2 id="skills-heading">Skills</h2>
      {agentId && (
        <label style={{ maxWidth: 320 }}>
          Partition
          <select
            value={partition ?? ""}
            onChange={(event) => setPartition(event.target.value === "" ? null : event.target.value)}
          >
            <option value={agentId}>agent {agentId}</option>
            <option value="">default</option>
          </select>
        </label>
      )}
      {skills.error && (
        <div className="alert error" role="alert">
          {skills.error.message}
        </div>
      )}
      {skills.data &&
        (skills.data.length === 0 ? (
          <p className="muted">No skills in this partition.</p>
        ) : (
          <table className="data">
            <thead>
              <tr>
                <th>Name</th>
                <th>Description</th>
                <th>Updated</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {skills.data.map((skill) => (
                <tr key={skill.dir} data-testid="skill-row">
                  <td className="mono">{skill.name}</td>
                  <td>{skill.description}</td>
                  <td>{skill.updatedAt ? formatDate(new Date(skill.updatedAt)) : "—"}</td>
                  <td>
                    <button
                      type="button"
                      className="danger"
                      disabled={!canChange || remove.isPending}
                      // By folder: two skills may share a front-matter name, a folder is unique.
                      onClick={() =>
                        remove.mutate(
                          { ...target, dir: skill.dir },
                          {
                            onSuccess: () => setMessage({ kind: "success", text: `Removed ${skill.name}.` }),
                          },
                        )
                      }
                    >
                      Remove
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        ))}

      <form
        className="form-row"
        aria-label="Upload a skill"
        onSubmit={(event) => void upload(event, () => uploadSkillFolder(target, files))}
      >
        <label>
          Skill folder (with SKILL.md)
          <input
            type="file"
            // A folder picker: every file comes with its path inside the chosen folder.
            {...{ webkitdirectory: "", directory: "" }}
            multiple
            disabled={!canChange || uploading}
            onChange={(event) => setFiles([...(event.target.files ?? [])])}
          />
        </label>
        <button type="submit" disabled={!canChange || uploading || files.length === 0}>
          {uploading ? "Uploading…" : "Upload"}
        </button>
      </form>
      <form
        className="form-row"
        aria-label="Skill archive"
        onSubmit={(event) => void upload(event, () => uploadSkillArchive(target, archive!))}
      >
        <label>
          Or a skill archive (.zip, .tar, .tar.gz)
          <input
            type="file"
            accept=".zip,.tar,.tar.gz,.tgz"
            disabled={!canChange || uploading}
            onChange={(event) => setArchive(event.target.files?.[0] ?? null)}
          />
        </label>
        <button type="submit" disabled={!canChange || uploading || archive === null}>
          {uploading ? "Sending…" : "Send archive"}
        </button>
      </form>
      {!canChange && role && <p className="muted">Changing skills needs the member role; you are {role}.</p>}
      <Notice message={message} testId="skills-message" />
    </section>
  );
}
