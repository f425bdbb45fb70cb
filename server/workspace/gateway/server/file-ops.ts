import { randomBytes } from "node:crypto";
import type { Stats } from "node:fs";
import fs from "node:fs/promises";
import type http from "node:http";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import { z } from "zod";
import { AppError, isAppError } from "@/server/shared/errors";
import type { DirEntry, FileStat } from "@/server/workspace/drivers/port";
import {
  fsError,
  toFileStat as toLocalFileStat,
} from "@/server/workspace/drivers/host-folder/host-folder-machine";
import { appendUnderLock } from "@/server/workspace/drivers/host-folder/locked-append";
import { ZGatewayFileOp, ZGatewayWriteMode, type TGatewayFileOp } from "../gateway-protocol";
import { expectsContinue, sendError, sendJson } from "./http-util";

/**
 * The file endpoints' semantics, run in whatever process serves them: the unprivileged file worker when the
 * gateway runs as root (file-worker.ts), the gateway itself otherwise. They mirror the Docker backend's exec
 * scripts (server/workspace/drivers/exec-scripts/file-scripts.ts) and map errno exactly like the local backend (`fsError`), so a caller
 * sees the same AppErrors whichever path served it. No confinement: the tools layer confines paths; the
 * process' uid is the guard, as it is for the exec path.
 */
const ZAbsolutePath = z
  .string()
  .min(1)
  .refine((value) => !value.includes("\0"), "path contains a NUL byte")
  .refine((value) => path.posix.isAbsolute(value), "path must be absolute");
const ZOffset = z.coerce.number().int().min(0).optional();
const ZPerm = z.coerce.number().int().min(0).max(0o7777).optional();

export async function handleFileRequest(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  try {
    const url = new URL(req.url ?? "/", "http://gateway");
    const op = ZGatewayFileOp.safeParse(url.pathname.slice("/files/".length));
    if (!url.pathname.startsWith("/files/") || !op.success) {
      throw new AppError("NOT_FOUND", `${req.method ?? "GET"} ${url.pathname} is not supported`);
    }
    const param = (name: string) => {
      const parsed = ZAbsolutePath.safeParse(url.searchParams.get(name) ?? "");
      if (!parsed.success)
        throw new AppError("BAD_REQUEST", `invalid ${name}: ${parsed.error.issues[0]?.message}`);
      return path.posix.normalize(parsed.data);
    };
    await dispatch(op.data, param, url.searchParams, req, res);
  } catch (error) {
    // A refused request's body was never sent (100-continue) or is drained so the connection stays sane.
    req.resume();
    sendError(res, error);
  }
}

async function dispatch(
  op: TGatewayFileOp,
  param: (name: string) => string,
  query: URLSearchParams,
  req: http.IncomingMessage,
  res: http.ServerResponse,
): Promise<void> {
  switch (op) {
    case "read":
      return readFile(param("path"), query, res);
    case "write":
      return writeFile(param("path"), query, req, res);
    case "stat":
      return sendJson(res, 200, { stat: await statOrNull(param("path")) });
    case "list":
      return sendJson(res, 200, { entries: await list(param("path")) });
    case "mkdir": {
      const target = param("path");
      await fs.mkdir(target, { recursive: true }).catch(rethrowFor(target));
      return sendJson(res, 200, { ok: true });
    }
    case "remove": {
      const target = param("path");
      await fs.rm(target, { recursive: true, force: true }).catch(rethrowFor(target));
      return sendJson(res, 200, { ok: true });
    }
    case "move":
      await move(param("from"), param("to"));
      return sendJson(res, 200, { ok: true });
    case "realpath":
      // Like `realpath -e`: any failure (missing, loop, no permission) is "no such path".
      return sendJson(res, 200, { path: await fs.realpath(param("path")).catch(() => null) });
  }
}

async function readFile(target: string, query: URLSearchParams, res: http.ServerResponse): Promise<void> {
  const start = parseQuery(ZOffset, query, "start");
  const end = parseQuery(ZOffset, query, "end");
  const handle = await fs.open(target, "r").catch(rethrowFor(target));
  try {
    if ((await handle.stat()).isDirectory()) {
      throw new AppError("BAD_REQUEST", `Path is a directory: ${target}`, { details: { path: target } });
    }
  } catch (error) {
    await handle.close();
    throw error;
  }
  if (end !== undefined && end < (start ?? 0)) {
    await handle.close();
    res.writeHead(200, { "content-type": "application/octet-stream", "content-length": 0 }).end();
    return;
  }
  res.writeHead(200, { "content-type": "application/octet-stream" });
  // pipeline: backpressure from the socket, and a client that goes away closes the file.
  await pipeline(handle.createReadStream({ start, end, autoClose: true }), res).catch(() => res.destroy());
}

async function writeFile(
  target: string,
  query: URLSearchParams,
  req: http.IncomingMessage,
  res: http.ServerResponse,
): Promise<void> {
  const mode = parseQuery(ZGatewayWriteMode.default("replace"), query, "mode");
  const perm = parseQuery(ZPerm, query, "perm");
  const dir = path.posix.dirname(target);
  await fs.mkdir(dir, { recursive: true }).catch(rethrowFor(dir));

  if (mode === "append") {
    const handle = await fs.open(target, "a").catch(rethrowFor(target));
    try {
      if (expectsContinue(req)) res.writeContinue();
      // Under the file's flock, like every other appender of the machine: contiguous at any size.
      await appendUnderLock(handle, req, target);
      if (perm !== undefined) await handle.chmod(perm);
    } finally {
      await handle.close();
    }
    return sendJson(res, 200, { ok: true });
  }

  // Replace and exclusive write beside the target first: readers never see half a file, and exclusive links
  // the finished file into place, which fails atomically when the name exists.
  const temp = path.posix.join(dir, `.${path.posix.basename(target)}.tmp-${randomBytes(6).toString("hex")}`);
  const handle = await fs.open(temp, "wx").catch(rethrowFor(target));
  try {
    if (perm !== undefined) await handle.chmod(perm);
    if (expectsContinue(req)) res.writeContinue();
    // The stream closes the handle (a FileHandle with a live stream on it would wait forever in close()).
    await pipeline(req, handle.createWriteStream({ autoClose: true }));
    if (mode === "exclusive") await fs.link(temp, target).catch(rethrowFor(target));
    else await fs.rename(temp, target).catch(rethrowFor(target));
  } finally {
    await handle.close().catch(() => undefined);
    await fs.rm(temp, { force: true });
  }
  sendJson(res, 200, { ok: true });
}

async function statOrNull(target: string): Promise<FileStat | null> {
  const info = await fs.lstat(target).catch((error: unknown) => {
    if (isMissing(error)) return null;
    throw fsError(error, target);
  });
  return info ? toFileStat(info) : null;
}

async function list(dir: string): Promise<DirEntry[]> {
  const names = await fs.readdir(dir).catch(rethrowFor(dir));
  const entries = await Promise.all(
    names.map(async (name): Promise<DirEntry | null> => {
      const stat = await statOrNull(path.posix.join(dir, name)).catch(() => null);
      if (!stat) return null; // deleted between readdir and lstat
      const size = stat.type === "directory" ? null : stat.size;
      return { name, type: stat.type, size, mtimeMs: stat.mtimeMs };
    }),
  );
  return entries.filter((entry): entry is DirEntry => entry !== null);
}

/** `mv -fT`: the destination is a name, replaced if it is a file; parents are created. */
async function move(source: string, target: string): Promise<void> {
  await fs.lstat(source).catch(rethrowFor(source));
  const dir = path.posix.dirname(target);
  await fs.mkdir(dir, { recursive: true }).catch(rethrowFor(dir));
  try {
    await fs.rename(source, target);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EXDEV") throw fsError(error, source);
    // Another filesystem (the bind-mounted workdir vs the container's own): copy, then delete.
    await fs
      .cp(source, target, { recursive: true, force: true, verbatimSymlinks: true })
      .catch(rethrowFor(target));
    await fs.rm(source, { recursive: true, force: true }).catch(rethrowFor(source));
  }
}

function toFileStat(info: Stats): FileStat {
  // Whole milliseconds, like the exec path (find's %T@), so both paths report the same mtime.
  const stat = toLocalFileStat(info);
  return { ...stat, mtimeMs: Math.round(stat.mtimeMs) };
}

function parseQuery<S extends z.ZodType>(schema: S, query: URLSearchParams, name: string): z.infer<S> {
  const parsed = schema.safeParse(query.get(name) ?? undefined);
  if (!parsed.success)
    throw new AppError("BAD_REQUEST", `invalid ${name}: ${parsed.error.issues[0]?.message}`);
  return parsed.data;
}

function isMissing(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException).code;
  return code === "ENOENT" || code === "ENOTDIR";
}

function rethrowFor(p: string) {
  return (error: unknown): never => {
    throw isAppError(error) ? error : fsError(error, p);
  };
}
