import { randomBytes } from "node:crypto";
import { setTimeout as delay } from "node:timers/promises";
import { AppError, isAppError } from "@/server/shared/errors";
import type { FileStat, WorkspaceMachine } from "@/server/workspace/drivers/port";
import {
  parseMcpFile,
  readMcpFile,
  readMcpText,
  serializeMcpFile,
  mcpNotPersisted,
  writeMcpFile,
  type McpSpecs,
} from "@/server/workspace/mcp/mcp-file";
import type { EngineLogger } from "@/server/workspace/mcp/types";

/**
 * A file younger than this is always read back, even when its size and mtime look unchanged: a backend
 * may report mtimes in whole seconds, so two writes of equal size within one second share a signature.
 */
const SETTLE_MS = 2_000;

/** A lock older than this was left by a process that died holding it: it is taken over. */
const LOCK_STALE_MS = 10_000;
/** How long a change waits for another process's change to finish before giving up. */
const LOCK_WAIT_MS = 15_000;

type Seen = { size: number; mtimeMs: number; serialized: string };

/**
 * `.mcp` shared by every process attached to one workspace (API replicas, workers, a restarted process):
 * each keeps its own view, refreshed when ANOTHER process rewrote or deleted the file. Writes remember
 * what they wrote, so a process never mistakes its own write for someone else's. Checking costs one stat
 * while the file is unchanged.
 *
 * Changes take `withLock` (a lock file created exclusively beside `.mcp`), so two processes changing
 * declarations at the same moment both land: each follows the file and writes inside the lock.
 */
export class McpFileSync {
  private seen: Seen | null = null;

  constructor(
    private readonly machine: WorkspaceMachine,
    private readonly path: string,
    private readonly logger: EngineLogger,
    private readonly now: () => number = Date.now,
  ) {}

  /** The file's declarations (none when missing or unreadable), remembered as seen. */
  async load(): Promise<McpSpecs> {
    const specs = await readMcpFile(this.machine, this.path, this.logger);
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
      stat = await this.machine.stat(this.path);
    } catch {
      return null;
    }
    if (!stat || stat.type !== "file") {
      const none = serializeMcpFile(new Map());
      if (this.seen?.serialized === none) return null;
      this.seen = { size: -1, mtimeMs: -1, serialized: none };
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
      specs = parseMcpFile(await readMcpText(await this.machine.readFile(this.path)), this.logger);
    } catch {
      return null;
    }
    const serialized = serializeMcpFile(specs);
    this.seen = { size: stat.size, mtimeMs: stat.mtimeMs, serialized };
    return seen?.serialized === serialized ? null : specs;
  }

  /**
   * Runs `change` (follow the file, change the declarations, write them) while holding `<path>.lock`,
   * which every process attached to the workspace honours. Held only for the read-change-write, never
   * across a connect. Waiting polls with a short backoff: another process's change takes milliseconds.
   */
  async withLock<T>(change: () => Promise<T>): Promise<T> {
    const lockPath = `${this.path}.lock`;
    const token = randomBytes(8).toString("hex");
    await this.acquire(lockPath, token);
    try {
      return await change();
    } finally {
      await this.release(lockPath, token);
    }
  }

  /**
   * Returns once the lock is ours. When it cannot be taken at all (an unwritable workdir, a backend
   * failing) the change could not be stored either: it is refused (`mcpNotPersisted`), never made unlocked.
   */
  private async acquire(lockPath: string, token: string): Promise<void> {
    const deadline = this.now() + LOCK_WAIT_MS;
    let wait = 2;
    for (;;) {
      try {
        await this.machine.writeFile(lockPath, token, { exclusive: true });
        return;
      } catch (error) {
        if (!isAppError(error) || error.code !== "CONFLICT") {
          this.logger.warn(
            { path: lockPath, error: String(error) },
            "Could not lock .mcp; refusing the change",
          );
          throw mcpNotPersisted(this.path, error, lockPath);
        }
      }
      const held = await this.machine.stat(lockPath).catch(() => null);
      if (held && this.now() - held.mtimeMs > LOCK_STALE_MS) {
        this.logger.warn({ path: lockPath }, "Taking over a stale .mcp lock");
        await this.machine.remove(lockPath).catch(() => undefined);
        continue;
      }
      if (this.now() > deadline) {
        throw new AppError("UNAVAILABLE", `${this.path} stayed locked by another process`, {
          userMessage: "Another change to this workspace's MCP servers is still running; try again.",
        });
      }
      await delay(wait);
      wait = Math.min(wait * 2, 100);
    }
  }

  /** Removes the lock only while it is still ours (a holder taken over as stale must not remove the next one's). */
  private async release(lockPath: string, token: string): Promise<void> {
    try {
      const held = await readMcpText(await this.machine.readFile(lockPath));
      if (held === token) await this.machine.remove(lockPath);
    } catch {
      // Already gone: nothing to release.
    }
  }

  /** Writes the declarations (atomically; a failure throws, see writeMcpFile) and remembers them. */
  async write(specs: McpSpecs): Promise<void> {
    await writeMcpFile(this.machine, this.path, specs, this.logger);
    await this.remember(specs);
  }

  private async remember(specs: McpSpecs): Promise<void> {
    const stat = await this.machine.stat(this.path).catch(() => null);
    this.seen = {
      size: stat?.size ?? -1,
      mtimeMs: stat?.mtimeMs ?? -1,
      serialized: serializeMcpFile(specs),
    };
  }
}
