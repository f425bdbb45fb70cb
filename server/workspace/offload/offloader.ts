import { createHash } from "node:crypto";
import path from "node:path";
import type { Readable } from "node:stream";
import { AppError, isAppError } from "@/server/shared/errors";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import { KeyedMutex } from "@/server/workspace/mcp/async-mutex";
import { assertSafeSegment } from "@/server/workspace/paths";
import { extensionForMediaType } from "./media-types";
import { openWorkspaceReference, toWorkspaceReference } from "./references";

const SESSIONS_DIR = "sessions";
const DATA_DIR = "data";
const CONTEXT_FILE = "context.jsonl";
/** How many `(n)` suffixes offloadToolResult tries before giving up (a loop guard, never hit in practice). */
const MAX_NAME_ATTEMPTS = 10_000;

/** The reference's DataBlock with a base64 source; it is replaced by a `workspace:///data/...` URL. */
type Base64DataBlock = {
  type: "data";
  id?: string;
  name?: string;
  source: { type: "base64"; data: string; media_type: string };
};
type UrlDataBlock = {
  type: "data";
  id?: string;
  name?: string;
  source: { type: "url"; url: string; media_type: string };
};
export type DataBlock = Base64DataBlock | UrlDataBlock;
type TextBlock = { type: "text"; text: string };

/** A chat message as stored in context.jsonl: any JSON object (reference Msg or AI SDK ModelMessage). */
export type OffloadMessage = object;
/** A tool result body: a string, or reference-style blocks (text concatenated, data blocks tagged). */
export type ToolResultOutput = string | ReadonlyArray<TextBlock | DataBlock | { type: string }>;

/**
 * Offload (agentscope-spec.md §4): moves bulky context out of the model's window into the workspace and
 * hands back `workspace:///` references that `open` streams back. Unlike the reference, appends to one
 * session's context.jsonl are serialised (its read-modify-write lost lines under concurrency), and tool
 * result names are claimed with exclusive creates, so two offloads never pick the same `(n)`.
 */
export class Offloader {
  private readonly sessionLocks = new KeyedMutex();

  constructor(private readonly machine: () => WorkspaceMachine) {}

  /**
   * Appends one JSON line per message to `sessions/<sid>/context.jsonl`. Inline binary content is offloaded
   * first and replaced by its `workspace:///data/...` URL: reference DataBlocks with a base64 source and
   * AI SDK `file`/`image` parts whose data is base64 text or bytes.
   */
  async offloadContext(sessionId: string, messages: readonly OffloadMessage[]): Promise<string> {
    assertSafeSegment(sessionId, "session id");
    const relative = path.posix.join(SESSIONS_DIR, sessionId, CONTEXT_FILE);
    const lines: string[] = [];
    for (const message of messages) {
      const copy = structuredClone(message) as { content?: unknown };
      if (Array.isArray(copy.content)) {
        copy.content = await Promise.all((copy.content as unknown[]).map((part) => this.offloadPart(part)));
      }
      // JSON.stringify never emits a raw newline, so one message is one line.
      lines.push(JSON.stringify(copy));
    }
    if (lines.length === 0) return toWorkspaceReference(relative);
    const payload = `${lines.join("\n")}\n`;
    await this.sessionLocks.run(sessionId, () =>
      this.machine().writeFile(this.absolute(relative), payload, { append: true }),
    );
    return toWorkspaceReference(relative);
  }

  /** Writes a tool result to `sessions/<sid>/tool_result-<id>.txt`, or `(1)`, `(2)`, ... when taken. */
  async offloadToolResult(sessionId: string, toolCallId: string, output: ToolResultOutput): Promise<string> {
    assertSafeSegment(sessionId, "session id");
    assertSafeSegment(toolCallId, "tool call id");
    const body = await this.toolResultText(output);
    const dir = path.posix.join(SESSIONS_DIR, sessionId);
    return this.sessionLocks.run(sessionId, async () => {
      for (let attempt = 0; attempt < MAX_NAME_ATTEMPTS; attempt++) {
        const name =
          attempt === 0 ? `tool_result-${toolCallId}.txt` : `tool_result-${toolCallId}(${attempt}).txt`;
        const relative = path.posix.join(dir, name);
        try {
          await this.machine().writeFile(this.absolute(relative), body, { exclusive: true });
          return toWorkspaceReference(relative);
        } catch (error) {
          if (isAppError(error) && error.code === "CONFLICT") continue;
          throw error;
        }
      }
      throw new AppError("CONFLICT", `No free file name for tool result ${toolCallId}`);
    });
  }

  /**
   * Stores a base64 block's bytes as `data/<sha256 of the base64 text><ext>` (deduplicated: an existing
   * file is kept) and returns the block with a `workspace:///data/...` URL source. Other blocks pass through.
   */
  async offloadDataBlock<Block extends DataBlock>(block: Block): Promise<DataBlock> {
    if (block.source.type !== "base64") return block;
    const { data, media_type } = block.source;
    const url = await this.storeBase64(data, media_type);
    return { ...block, source: { type: "url", url, media_type } };
  }

  /** Streams any `workspace:///` reference back (confined to the workdir). */
  open(reference: string): Promise<Readable> {
    return openWorkspaceReference(this.machine(), reference);
  }

  /** Deletes `sessions/<sid>` (context and tool results). */
  async purgeSession(sessionId: string): Promise<void> {
    assertSafeSegment(sessionId, "session id");
    await this.sessionLocks.run(sessionId, () =>
      this.machine().remove(this.absolute(path.posix.join(SESSIONS_DIR, sessionId))),
    );
  }

  /** Stores base64 text's decoded bytes under its hash; returns the `workspace:///data/...` reference. */
  private async storeBase64(base64: string, mediaType: string): Promise<string> {
    const hash = createHash("sha256").update(base64, "utf8").digest("hex");
    const relative = path.posix.join(DATA_DIR, `${hash}${extensionForMediaType(mediaType)}`);
    const machine = this.machine();
    const target = this.absolute(relative);
    if ((await machine.stat(target)) === null) {
      // writeFile replaces atomically, so two writers of the same hash both leave one complete file.
      await machine.writeFile(target, Buffer.from(base64, "base64"));
    }
    return toWorkspaceReference(relative);
  }

  private async offloadPart(part: unknown): Promise<unknown> {
    if (isBase64DataBlock(part)) return this.offloadDataBlock(part);
    if (typeof part !== "object" || part === null) return part;
    const candidate = part as { type?: unknown; data?: unknown; image?: unknown; mediaType?: unknown };
    const field = candidate.type === "file" ? "data" : candidate.type === "image" ? "image" : null;
    if (field === null) return part;
    const base64 = inlineBase64(candidate[field]);
    if (base64 === null) return part;
    const mediaType =
      typeof candidate.mediaType === "string" ? candidate.mediaType : "application/octet-stream";
    return { ...candidate, [field]: await this.storeBase64(base64, mediaType) };
  }

  private async toolResultText(output: ToolResultOutput): Promise<string> {
    if (typeof output === "string") return output;
    let text = "";
    // As in the reference: texts concatenated without a separator, data blocks as tags, others dropped.
    for (const block of output) {
      if (block.type === "text" && "text" in block) text += block.text;
      else if (isDataBlock(block)) {
        const stored = await this.offloadDataBlock(block);
        const url = stored.source.type === "url" ? stored.source.url : "";
        text += `<data url='${url}' name='${stored.name ?? ""}' media_type='${stored.source.media_type}'/>`;
      }
    }
    return text;
  }

  private absolute(relative: string): string {
    return path.posix.join(this.machine().workdir, relative);
  }
}

function isDataBlock(block: unknown): block is DataBlock {
  if (typeof block !== "object" || block === null) return false;
  const candidate = block as { type?: unknown; source?: { type?: unknown } };
  return candidate.type === "data" && typeof candidate.source === "object" && candidate.source !== null;
}

function isBase64DataBlock(block: unknown): block is Base64DataBlock {
  return isDataBlock(block) && block.source.type === "base64" && typeof block.source.data === "string";
}

/** AI SDK parts carry bytes, base64 text, or a URL (string or object); only inline data is offloaded. */
function inlineBase64(value: unknown): string | null {
  if (value instanceof Uint8Array) return Buffer.from(value).toString("base64");
  if (typeof value !== "string" || value.length === 0) return null;
  if (/^[a-z][a-z0-9+.-]*:/i.test(value)) return null; // http:, https:, data:, workspace: ...
  return /^[A-Za-z0-9+/=\r\n]+$/.test(value) ? value : null;
}
