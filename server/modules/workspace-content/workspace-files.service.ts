import path from "node:path";
import type { Readable } from "node:stream";
import type { TenantScope } from "@/server/auth/scope";
import { AppError } from "@/server/shared/errors";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import { LAYOUT_DIRECTORIES, WORKSPACE_LAYOUT } from "@/server/workspace/layout";
import { isInside, realWorkdir, resolveConfined, resolveLexically } from "@/server/workspace/paths";
import type { Workspace } from "@/server/workspace/workspace";
import { signDownloadToken } from "./download-token";
import type { WorkspaceService } from "@/server/modules/workspace/workspace.service";
import { bindDeps } from "@/server/shared/bind-deps";

/** The most a read returns (the preview); the download link gives the whole file. */
const MAX_READ_BYTES = 1024 * 1024;
/** A file is edited in place only when it fits here whole: the editor loads, and saves, all of it. */
const EDITABLE_MAX_BYTES = 1024 * 1024;
/** One uploaded file, as large as one file of a skill upload (SKILL_UPLOAD_LIMITS.maxFileBytes). */
export const FILE_UPLOAD_MAX_BYTES = 50 * 1024 * 1024;

/** True when the bytes are not text: a NUL, or not UTF-8 (a sequence cut at the end of a preview is fine). */
function isBinary(bytes: Buffer, cut: boolean): boolean {
  if (bytes.includes(0)) return true;
  // A truncated preview may end inside a character: drop up to 3 trailing bytes before judging.
  for (let drop = 0; drop <= (cut ? 3 : 0) && drop <= bytes.length; drop++) {
    try {
      new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(0, bytes.length - drop));
      return false;
    } catch {
      // try with one byte less
    }
  }
  return true;
}

const refused = (why: string) => new AppError("FORBIDDEN", why, { userMessage: why });

/**
 * The dashboard's file browser changes project files only: the workdir itself, the `.mcp` declarations and
 * everything under `skills/` have their own tabs (and the engine's bookkeeping), and the layout folders must
 * stay (files inside `data/` and `sessions/` may go).
 */
function assertChangeable(relative: string): void {
  if (relative === "." || relative === "") throw refused("The workspace folder itself cannot be changed.");
  const top = relative.split("/")[0];
  if (top === WORKSPACE_LAYOUT.mcpFile) throw refused("MCP declarations are changed in the MCP servers tab.");
  if (top === WORKSPACE_LAYOUT.skillsDir) throw refused("Skills are changed in the Skills tab.");
  if ((LAYOUT_DIRECTORIES as readonly string[]).includes(relative))
    throw refused(`${relative}/ is part of the workspace layout and stays.`);
}

/**
 * A path to change, confined to the workdir: its parent resolved (symlinks followed, never out of the
 * workdir) and the last segment kept as it is, so deleting a symlink deletes the link, not what it points to.
 */
async function changeTarget(backend: WorkspaceMachine, userPath: string) {
  const lexical = resolveLexically(backend.workdir, userPath);
  if (lexical === backend.workdir) assertChangeable(".");
  const parent = await resolveConfined(backend, path.posix.dirname(lexical));
  const target = path.posix.join(parent, path.posix.basename(lexical));
  const root = await realWorkdir(backend);
  const relative = path.posix.relative(root, target) || ".";
  assertChangeable(relative);
  return { target, relative };
}

function relativeTo(ws: Workspace, target: string): string {
  if (!isInside(ws.workdir, target)) return target;
  return path.posix.relative(ws.workdir, target) || ".";
}

const notFound = (what: string) =>
  new AppError("NOT_FOUND", `no ${what}`, { userMessage: "File not found." });

/** What the file use cases need of the workspace service. */
type FilesDeps = Pick<WorkspaceService, "withWorkspace" | "audited" | "engine">;

/** A read: a quiet call lease (no ledger events). */
function readingWorkspace<T>(
  service: FilesDeps,
  scope: TenantScope,
  workspaceId: string,
  reason: string,
  fn: (ws: Workspace) => Promise<T>,
): Promise<T> {
  return service.withWorkspace(scope, workspaceId, reason, (ws) => fn(ws), { quiet: true });
}

/** A change: audited, under a call lease that leaves its events. */
function changingWorkspace<T>(
  service: FilesDeps,
  scope: TenantScope,
  workspaceId: string,
  action: string,
  details: Record<string, unknown>,
  fn: (ws: Workspace) => Promise<T>,
): Promise<T> {
  return service.audited(scope, action, workspaceId, details, () =>
    service.withWorkspace(scope, workspaceId, action, (ws) => fn(ws)),
  );
}

async function listWorkspaceFiles(service: FilesDeps, scope: TenantScope, workspaceId: string, dir: string) {
  return readingWorkspace(service, scope, workspaceId, "workspace.files.list", async (ws) => {
    const target = await resolveConfined(ws.machine, dir || ".");
    const info = await ws.machine.stat(target);
    if (!info)
      throw new AppError("NOT_FOUND", `no directory ${dir}`, { userMessage: "Directory not found." });
    if (info.type !== "directory")
      throw new AppError("BAD_REQUEST", `${dir} is not a directory`, { userMessage: "Not a directory." });
    const entries = await ws.machine.list(target);
    return {
      path: relativeTo(ws, target),
      entries: entries
        .map((entry) => ({
          name: entry.name,
          isDir: entry.type === "directory",
          sizeBytes: entry.size,
          updatedAt: entry.mtimeMs === null ? null : new Date(entry.mtimeMs),
        }))
        .sort((a, b) => Number(b.isDir) - Number(a.isDir) || a.name.localeCompare(b.name)),
    };
  });
}

/**
 * A file's text (UTF-8), at most `maxBytes` (default and cap 1 MiB); `truncated` says when cut, `binary`
 * when it is not text, `editable` when the editor can load and save all of it, `updatedAt` is what
 * `writeFile` checks against.
 */
async function readWorkspaceFile(
  service: FilesDeps,
  scope: TenantScope,
  workspaceId: string,
  file: string,
  maxBytes = MAX_READ_BYTES,
) {
  return readingWorkspace(service, scope, workspaceId, "workspace.files.read", async (ws) => {
    const target = await resolveConfined(ws.machine, file);
    const info = await ws.machine.stat(target);
    if (!info || info.type === "directory") throw notFound(`file ${file}`);
    const limit = Math.min(maxBytes, MAX_READ_BYTES);
    const chunks: Buffer[] = [];
    if (info.size > 0) {
      const range = { start: 0, end: Math.min(info.size, limit) - 1 };
      for await (const chunk of await ws.machine.readFile(target, range)) chunks.push(chunk as Buffer);
    }
    const bytes = Buffer.concat(chunks);
    const truncated = info.size > limit;
    const binary = isBinary(bytes, truncated);
    return {
      path: relativeTo(ws, target),
      sizeBytes: info.size,
      updatedAt: new Date(info.mtimeMs),
      truncated,
      binary,
      editable: !binary && !truncated && info.size <= EDITABLE_MAX_BYTES,
      content: binary ? "" : bytes.toString("utf8"),
    };
  });
}

/**
 * Saves a text file from the editor (or creates one with `mustNotExist`). Refused: more than
 * EDITABLE_MAX_BYTES, content with NUL bytes, replacing a binary or too large file, and (with
 * `expectedUpdatedAt`) a file changed since it was read (CONFLICT). The file keeps its permissions.
 */
async function writeWorkspaceFile(
  service: FilesDeps,
  scope: TenantScope,
  workspaceId: string,
  file: string,
  content: string,
  options: { expectedUpdatedAt?: Date; mustNotExist?: boolean } = {},
) {
  const bytes = Buffer.from(content, "utf8");
  if (bytes.length > EDITABLE_MAX_BYTES)
    throw new AppError("PAYLOAD_TOO_LARGE", `${bytes.length} bytes`, {
      userMessage: `A file edited here holds at most ${EDITABLE_MAX_BYTES / 1024 / 1024} MiB.`,
    });
  if (bytes.includes(0))
    throw new AppError("BAD_REQUEST", "NUL in text", { userMessage: "Text cannot hold NUL bytes." });
  return changingWorkspace(
    service,
    scope,
    workspaceId,
    "workspace.files.write",
    { path: file },
    async (ws) => {
      const { target, relative } = await changeTarget(ws.machine, file);
      const existing = await ws.machine.stat(target);
      if (existing?.type === "directory")
        throw new AppError("BAD_REQUEST", "a directory", { userMessage: `${relative} is a folder.` });
      if (existing && options.mustNotExist)
        throw new AppError("CONFLICT", "exists", { userMessage: `${relative} already exists.` });
      if (existing) {
        if (existing.size > EDITABLE_MAX_BYTES)
          throw new AppError("BAD_REQUEST", "too large to edit", {
            userMessage: `${relative} is too large to edit here: download it instead.`,
          });
        const chunks: Buffer[] = [];
        for await (const chunk of await ws.machine.readFile(target)) chunks.push(chunk as Buffer);
        if (isBinary(Buffer.concat(chunks), false))
          throw new AppError("BAD_REQUEST", "binary", {
            userMessage: `${relative} is a binary file: it cannot be edited as text.`,
          });
        // Compared to the millisecond: a Date (what `readFile` gave) holds no finer mtime.
        if (options.expectedUpdatedAt && Math.trunc(existing.mtimeMs) !== options.expectedUpdatedAt.getTime())
          throw new AppError("CONFLICT", "changed since read", {
            userMessage: `${relative} changed since you opened it: reload it before saving.`,
          });
      }
      await ws.machine.writeFile(target, bytes, existing ? { mode: existing.mode } : {});
      const saved = await ws.machine.stat(target);
      return { path: relative, sizeBytes: bytes.length, updatedAt: new Date(saved?.mtimeMs ?? Date.now()) };
    },
  );
}

/** Streams an uploaded file to `dir/name` (never buffered whole); an existing file needs `overwrite`. */
async function uploadWorkspaceFile(
  service: FilesDeps,
  scope: TenantScope,
  workspaceId: string,
  input: { path: string; stream: Readable; overwrite: boolean },
) {
  return changingWorkspace(
    service,
    scope,
    workspaceId,
    "workspace.files.upload",
    { path: input.path },
    async (ws) => {
      const { target, relative } = await changeTarget(ws.machine, input.path);
      const existing = await ws.machine.stat(target);
      if (existing?.type === "directory")
        throw new AppError("CONFLICT", "a directory", { userMessage: `${relative} is a folder.` });
      if (existing && !input.overwrite)
        throw new AppError("CONFLICT", "exists", { userMessage: `${relative} already exists.` });
      await ws.machine.mkdir(path.posix.dirname(target));
      await ws.machine.writeFile(target, input.stream);
      const saved = await ws.machine.stat(target);
      return { path: relative, sizeBytes: saved?.size ?? 0 };
    },
  );
}

async function makeWorkspaceDirectory(
  service: FilesDeps,
  scope: TenantScope,
  workspaceId: string,
  dir: string,
) {
  return changingWorkspace(
    service,
    scope,
    workspaceId,
    "workspace.files.mkdir",
    { path: dir },
    async (ws) => {
      const { target, relative } = await changeTarget(ws.machine, dir);
      if (await ws.machine.stat(target))
        throw new AppError("CONFLICT", "exists", { userMessage: `${relative} already exists.` });
      await ws.machine.mkdir(target);
      return { path: relative };
    },
  );
}

/** Deletes a file, or a folder with everything in it. */
async function removeWorkspaceFile(
  service: FilesDeps,
  scope: TenantScope,
  workspaceId: string,
  file: string,
) {
  return changingWorkspace(
    service,
    scope,
    workspaceId,
    "workspace.files.delete",
    { path: file },
    async (ws) => {
      const { target, relative } = await changeTarget(ws.machine, file);
      const existing = await ws.machine.stat(target);
      if (!existing) throw notFound(relative);
      await ws.machine.remove(target);
      return { path: relative, wasDir: existing.type === "directory" };
    },
  );
}

/** Resolves the workspace (to fail early, as the reference does) and signs a link for one file. */
async function signWorkspaceFileDownload(
  service: FilesDeps,
  scope: TenantScope,
  workspaceId: string,
  file: string,
) {
  return readingWorkspace(service, scope, workspaceId, "workspace.files.downloadToken", async (ws) => {
    const target = await resolveConfined(ws.machine, file);
    if ((await ws.machine.stat(target))?.type !== "file") throw notFound(`file ${file}`);
    const expiresAt = Date.now() + service.engine.config.downloadTokenTtlMs;
    const token = signDownloadToken(service.engine.downloadSecret, {
      tenantId: scope.tenantId,
      workspaceId,
      path: file,
      expiresAt,
    });
    return {
      token,
      expiresAt: new Date(expiresAt),
      url: `/api/workspaces/${encodeURIComponent(workspaceId)}/files/download?path=${encodeURIComponent(file)}&token=${encodeURIComponent(token)}`,
    };
  });
}

/** The download route's work: stream one confined file (the token was verified by the caller). */
async function openWorkspaceFile(
  service: FilesDeps,
  scope: TenantScope,
  workspaceId: string,
  file: string,
  fn: (file: { stream: Readable; size: number; name: string }) => Promise<Response>,
) {
  return readingWorkspace(service, scope, workspaceId, "workspace.files.download", async (ws) => {
    const target = await resolveConfined(ws.machine, file);
    const info = await ws.machine.stat(target);
    if (!info) throw notFound(`file ${file}`);
    if (info.type !== "file")
      throw new AppError("BAD_REQUEST", `${file} is not a file`, { userMessage: "Not a file." });
    return fn({
      stream: await ws.machine.readFile(target),
      size: info.size,
      name: path.posix.basename(target),
    });
  });
}

/**
 * `workspace.files.*` and the file routes: browse, read (with a binary check), edit a text file in place,
 * upload (streamed), new folder, delete, and signed download links, each a function above. Reads take a
 * quiet call lease (no ledger events); changes are audited. Spread into the workspace content service.
 */
export function createWorkspaceFilesService(service: WorkspaceService) {
  const bind = bindDeps<FilesDeps>(service);
  return {
    listFiles: bind(listWorkspaceFiles),
    readFile: bind(readWorkspaceFile),
    writeFile: bind(writeWorkspaceFile),
    uploadFile: bind(uploadWorkspaceFile),
    makeDirectory: bind(makeWorkspaceDirectory),
    remove: bind(removeWorkspaceFile),
    downloadToken: bind(signWorkspaceFileDownload),
    openFile: bind(openWorkspaceFile),
  };
}
