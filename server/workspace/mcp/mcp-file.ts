import { randomBytes } from "node:crypto";
import type { Readable } from "node:stream";
import { AppError, isAppError } from "@/server/shared/errors";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import {
  ZMcpDeclaration,
  type EngineLogger,
  type McpScope,
  type TMcpConfig,
  type TMcpDeclaration,
} from "@/server/workspace/mcp/types";

/** The `.mcp` file name, at the workspace root (agentscope-spec.md §1.2). */
export const MCP_FILE_NAME = ".mcp";

/** A `.mcp` file can only be this large; anything bigger is not ours and is ignored. */
const MAX_MCP_FILE_BYTES = 16 * 1024 * 1024;

/** Declared MCPs per diverged scope, in insertion order (the order the file lists them). */
export type McpSpecs = Map<string, { scope: McpScope; declarations: TMcpDeclaration[] }>;

/** Map key of a scope; JSON so no separator can collide with an id, as the reference's nesting intends. */
export function scopeKey(scope: McpScope): string {
  return JSON.stringify([scope.agentId, scope.sessionId]);
}

/**
 * Parses `.mcp` text, v1 (a top-level list → scope ("","")) or v2 (`{version, mcps: {agent: {session: []}}}`).
 * Malformed JSON or an unknown shape gives no specs; invalid entries are skipped one by one with a warning
 * (reference issue #1817), and so is a second entry with a name already seen in that scope.
 */
export function parseMcpFile(text: string, logger: EngineLogger): McpSpecs {
  const specs: McpSpecs = new Map();
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (error) {
    logger.warn({ error: String(error) }, "Ignoring .mcp: not valid JSON");
    return specs;
  }
  if (Array.isArray(data)) {
    addScope(specs, { agentId: "", sessionId: "" }, data, logger);
    return specs;
  }
  if (!isRecord(data) || !isRecord(data.mcps)) {
    logger.warn({}, "Ignoring .mcp: neither a v1 list nor a v2 object with `mcps`");
    return specs;
  }
  for (const [agentId, sessions] of Object.entries(data.mcps)) {
    if (!isRecord(sessions)) continue;
    for (const [sessionId, entries] of Object.entries(sessions)) {
      if (!Array.isArray(entries)) continue;
      addScope(specs, { agentId, sessionId }, entries, logger);
    }
  }
  return specs;
}

function addScope(specs: McpSpecs, scope: McpScope, entries: unknown[], logger: EngineLogger): void {
  const declarations: TMcpDeclaration[] = [];
  const names = new Set<string>();
  entries.forEach((entry, index) => {
    const parsed = ZMcpDeclaration.safeParse(entry);
    if (!parsed.success) {
      logger.warn(
        { scope, index, issues: parsed.error.issues.map((i) => i.message) },
        "Skipping invalid .mcp entry",
      );
      return;
    }
    if (names.has(parsed.data.name)) {
      logger.warn({ scope, index, name: parsed.data.name }, "Skipping duplicate .mcp entry");
      return;
    }
    names.add(parsed.data.name);
    declarations.push(parsed.data);
  });
  specs.set(scopeKey(scope), { scope, declarations });
}

/**
 * Renders specs as `.mcp` v2: the text `JSON.stringify(value, null, 2)` would give, with agents, sessions and
 * fields in the reference's order (`model_dump`: name, is_stateful, mcp_config, enable_tools, disable_tools,
 * execution_timeout). Built by hand because JS objects would move integer-like ids (an agent "42") first.
 */
export function serializeMcpFile(specs: McpSpecs): string {
  const agents = new Map<string, Array<[string, unknown]>>();
  for (const { scope, declarations } of specs.values()) {
    let sessions = agents.get(scope.agentId);
    if (!sessions) {
      sessions = [];
      agents.set(scope.agentId, sessions);
    }
    sessions.push([scope.sessionId, declarations.map(orderedDeclaration)]);
  }
  const mcps = new Ordered([...agents].map(([agentId, sessions]) => [agentId, new Ordered(sessions)]));
  return render(
    new Ordered([
      ["version", 2],
      ["mcps", mcps],
    ]),
    "",
  );
}

/** Reads and parses `.mcp`; a missing or unreadable file gives no specs (logged), as in the reference. */
export async function readMcpFile(
  machine: WorkspaceMachine,
  path: string,
  logger: EngineLogger,
): Promise<McpSpecs> {
  const stat = await machine.stat(path).catch(() => null);
  if (!stat) return new Map();
  if (stat.type !== "file" || stat.size > MAX_MCP_FILE_BYTES) {
    logger.warn({ path, type: stat.type, size: stat.size }, "Ignoring .mcp: not a regular file of sane size");
    return new Map();
  }
  try {
    return parseMcpFile(await readMcpText(await machine.readFile(path)), logger);
  } catch (error) {
    logger.warn({ path, error: String(error) }, "Ignoring .mcp: read failed");
    return new Map();
  }
}

/**
 * Writes `.mcp` atomically (temp file beside it, then move). A failed write is an error
 * (`mcpNotPersisted`): a change other processes cannot see and a restart would lose must not be
 * reported as done (issue 11: a read-only workdir answered success while nothing was written).
 */
export async function writeMcpFile(
  machine: WorkspaceMachine,
  path: string,
  specs: McpSpecs,
  logger: EngineLogger,
): Promise<void> {
  const temp = `${path}.tmp-${randomBytes(6).toString("hex")}`;
  try {
    await machine.writeFile(temp, serializeMcpFile(specs));
    await machine.move(temp, path);
  } catch (error) {
    logger.warn({ path, error: String(error) }, "Failed to save .mcp; the change is refused");
    await machine.remove(temp).catch(() => undefined);
    throw mcpNotPersisted(path, error);
  }
}

/** The reason in `details` of every error saying a change of the MCP declarations was not stored. */
export const MCP_NOT_PERSISTED = "mcp_not_persisted";

/**
 * errno codes of storage that refuses the write until someone changes it (remounts, fixes permissions,
 * frees space): the same request fails again, so it is not a retryable outage.
 */
const REFUSING_STORAGE = {
  EROFS: "read-only file system",
  EACCES: "permission denied",
  EPERM: "operation not permitted",
  ENOSPC: "no space left on device",
  EDQUOT: "disk quota exceeded",
} as const;
type RefusingStorageErrno = keyof typeof REFUSING_STORAGE;

/**
 * The refusing errno behind a failed write: backends report it as the AppError's `details.errno` (local
 * filesystem, gateway), as a raw errno error, or only in the message (a script's stderr).
 */
function refusingErrno(cause: unknown): RefusingStorageErrno | null {
  const candidate = cause as { code?: unknown; message?: unknown; details?: { errno?: unknown } } | null;
  const named = [candidate?.details?.errno, candidate?.code].find(
    (code): code is RefusingStorageErrno => typeof code === "string" && Object.hasOwn(REFUSING_STORAGE, code),
  );
  const inMessage = /\b(EROFS|EACCES|EPERM|ENOSPC|EDQUOT)\b/.exec(
    typeof candidate?.message === "string" ? candidate.message : "",
  )?.[1];
  return named ?? (inMessage as RefusingStorageErrno | undefined) ?? null;
}

/**
 * The change was not made, here or anywhere (`details.reason` `mcp_not_persisted`). Storage that refuses
 * writes (EROFS, EACCES, …: a read-only or foreign-owned workdir) is UNPROCESSABLE naming the errno and
 * the file: retrying the same call cannot succeed. Anything else (a backend that did not answer) is
 * UNAVAILABLE, retryable once the workspace's storage takes writes again. `written`: the file the write
 * was for (`.mcp`, or its `.mcp.lock`).
 */
export function mcpNotPersisted(path: string, cause: unknown, written: string = path): AppError {
  const errno = refusingErrno(cause);
  if (errno) {
    // The file's name only: where the workdir is on the host is nobody's business.
    const file = written.split("/").pop() || written;
    const why = `writing ${file} failed with ${errno} (${REFUSING_STORAGE[errno]})`;
    return new AppError("UNPROCESSABLE", `could not save ${path}: ${why}: ${String(cause)}`, {
      cause,
      userMessage: `The change to the workspace's MCP servers could not be saved: ${why}; nothing was changed.`,
      details: {
        reason: MCP_NOT_PERSISTED,
        errno,
        file,
        ...(isAppError(cause) ? { storageError: cause.code } : {}),
      },
    });
  }
  return new AppError("UNAVAILABLE", `could not save ${path}: ${String(cause)}`, {
    cause,
    userMessage:
      "The change to the workspace's MCP servers could not be saved (its files are not writable); nothing was changed.",
    details: {
      reason: MCP_NOT_PERSISTED,
      ...(isAppError(cause) ? { storageError: cause.code } : {}),
    },
  });
}

/** An object whose keys keep the order given (integer-like keys included). */
class Ordered {
  constructor(readonly entries: Array<[string, unknown]>) {}
}

function orderedDeclaration(declaration: TMcpDeclaration): Ordered {
  return new Ordered([
    ["name", declaration.name],
    ["is_stateful", declaration.is_stateful],
    ["mcp_config", orderedConfig(declaration.mcp_config)],
    ["enable_tools", declaration.enable_tools],
    ["disable_tools", declaration.disable_tools],
    ["execution_timeout", declaration.execution_timeout],
  ]);
}

function orderedConfig(config: TMcpConfig): Ordered {
  switch (config.type) {
    case "stdio_mcp":
      return new Ordered([
        ["type", config.type],
        ["command", config.command],
        ["args", config.args],
        ["env", config.env],
        ["cwd", config.cwd],
        ["encoding_error_handler", config.encoding_error_handler],
      ]);
    case "http_mcp":
      return new Ordered([
        ["type", config.type],
        ["url", config.url],
        ["headers", config.headers],
        ["timeout", config.timeout],
      ]);
  }
}

/** Exactly JSON.stringify(value, null, 2)'s layout, for values built from Ordered, arrays and JSON scalars. */
function render(value: unknown, indent: string): string {
  const inner = `${indent}  `;
  if (value instanceof Ordered) {
    if (value.entries.length === 0) return "{}";
    const lines = value.entries.map(
      ([key, child]) => `${inner}${JSON.stringify(key)}: ${render(child, inner)}`,
    );
    return `{\n${lines.join(",\n")}\n${indent}}`;
  }
  if (Array.isArray(value)) {
    if (value.length === 0) return "[]";
    return `[\n${value.map((child) => `${inner}${render(child, inner)}`).join(",\n")}\n${indent}]`;
  }
  if (isRecord(value)) return render(new Ordered(Object.entries(value)), indent);
  return JSON.stringify(value);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A `.mcp` file's text, refusing files larger than any `.mcp` Berth writes. */
export async function readMcpText(stream: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    const buffer = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string);
    size += buffer.length;
    if (size > MAX_MCP_FILE_BYTES) {
      stream.destroy();
      throw new Error(".mcp is larger than expected");
    }
    chunks.push(buffer);
  }
  return Buffer.concat(chunks).toString("utf8");
}
