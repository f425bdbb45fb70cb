import type { FileStat, WorkspaceBackend } from "@/server/workspace/backend/port";
import {
  parseMcpFile,
  readMcpFile,
  readMcpText,
  serializeMcpFile,
  writeMcpFile,
  type McpSpecs,
} from "@/server/workspace/mcp/mcp-file";
import type { EngineLogger } from "@/server/workspace/mcp/types";

/**
 * A file younger than this is always read back, even when its size and mtime look unchanged: a backend
 * may report mtimes in whole seconds, so two writes of equal size within one second share a signature.
 */
const SETTLE_MS = 2_000;

type Seen = { size: number; mtimeMs: number; serialized: string };

/**
 * `.mcp` shared by every process attached to one workspace (API replicas, workers, a restarted process):
 * each keeps its own view, refreshed when ANOTHER process rewrote or deleted the file. Writes remember
 * what they wrote, so a process never mistakes its own write for someone else's. Checking costs one stat
 * while the file is unchanged.
 *
 * Not a cross-process lock: two processes changing declarations at the same moment can still lose one
 * change (the later write wins); the registry narrows that window by following right before it writes.
 */
export class McpFileSync {
  private seen: Seen | null = null;

  constructor(
    private readonly backend: WorkspaceBackend,
    private readonly path: string,
    private readonly logger: EngineLogger,
    private readonly now: () => number = Date.now,
  ) {}

  /** The file's declarations (none when missing or unreadable), remembered as seen. */
  async load(): Promise<McpSpecs> {
    const specs = await readMcpFile(this.backend, this.path, this.logger);
    await this.remember(specs);
    return specs;
  }

  /**
   * The file's declarations when they differ from what this process last read or wrote, else null. A
   * missing file (another process reset the workspace) gives an empty map; a stat or read that fails says
   * nothing about the content and gives null.
   */
  async changes(): Promise<McpSpecs | null> {
    let stat: FileStat | null;
    try {
      stat = await this.backend.stat(this.path);
    } catch {
      return null;
    }
    if (!stat || stat.type !== "file") {
      if (this.seen?.serialized === serializeMcpFile(new Map())) return null;
      this.seen = { size: -1, mtimeMs: -1, serialized: serializeMcpFile(new Map()) };
      return new Map();
    }
    const seen = this.seen;
    if (
      seen &&
      stat.size === seen.size &&
      stat.mtimeMs === seen.mtimeMs &&
      this.now() - stat.mtimeMs > SETTLE_MS
    ) {
      return null;
    }
    let specs: McpSpecs;
    try {
      specs = parseMcpFile(await readMcpText(await this.backend.readFile(this.path)), this.logger);
    } catch {
      return null;
    }
    const serialized = serializeMcpFile(specs);
    this.seen = { size: stat.size, mtimeMs: stat.mtimeMs, serialized };
    return seen?.serialized === serialized ? null : specs;
  }

  /** Writes the declarations (atomically; failures logged, see writeMcpFile) and remembers them. */
  async write(specs: McpSpecs): Promise<void> {
    if (await writeMcpFile(this.backend, this.path, specs, this.logger)) await this.remember(specs);
  }

  private async remember(specs: McpSpecs): Promise<void> {
    const stat = await this.backend.stat(this.path).catch(() => null);
    this.seen = {
      size: stat?.size ?? -1,
      mtimeMs: stat?.mtimeMs ?? -1,
      serialized: serializeMcpFile(specs),
    };
  }
}
