import { Readable } from "node:stream";
import { AppError, isAppError } from "@/server/shared/errors";
import type { DirEntry, FileStat, WriteFileOptions } from "@/server/workspace/drivers/port";
import {
  parseList,
  parseStat,
  scriptError,
  SCRIPTS,
  streamScriptOutput,
  type ScriptRun,
  type ScriptSink,
} from "./file-scripts";

/** Small script outputs (stat lines, listings) are capped well above anything legitimate. */
const SCRIPT_OUTPUT_CAP = 64 * 1024 * 1024;

/**
 * How a machine runs a file script (`/bin/sh -c <script> <action> ...args`) as the workspace user: what an
 * exec-based driver (a `docker exec`, a `pods/exec`) provides so that ScriptFiles does the rest.
 */
export type ScriptRunner = {
  /** Runs argv to completion; stdout is kept up to `maxBytes`. */
  run(
    argv: string[],
    options: { stdin?: Readable | Uint8Array | string; maxBytes: number },
  ): Promise<{ exitCode: number; stdout: string; stderr: string }>;
  /** Starts argv with its output frames going to `sink` (backpressure: the sink returns false). */
  start(argv: string[], sink: ScriptSink): Promise<ScriptRun>;
};

/**
 * The machine's file operations as exec scripts (file-scripts.ts), one implementation for every exec-based
 * driver: byte ranges, atomic replace, exclusive create, locked append, stat/list/mkdir/remove/move/
 * realpath, tar in and out, each mapped to the AppError the host folders raise. Paths are absolute and
 * already resolved by the machine (confinement is the caller's, through `paths.ts`).
 */
export class ScriptFiles {
  constructor(private readonly runner: ScriptRunner) {}

  async readFile(target: string, options: { start?: number; end?: number } = {}): Promise<Readable> {
    const start = options.start ?? 0;
    if (options.end !== undefined && options.end < start) return Readable.from([]);
    const count = options.end !== undefined ? String(options.end - start + 1) : "";
    return this.stream(SCRIPTS.read, [target, start > 0 ? String(start) : "", count], target, "read");
  }

  async writeFile(
    target: string,
    data: Readable | Uint8Array | string,
    options: WriteFileOptions = {},
  ): Promise<void> {
    if (options.append && options.exclusive) {
      throw new AppError("BAD_REQUEST", "append and exclusive cannot be combined");
    }
    const mode = options.append ? "append" : options.exclusive ? "exclusive" : "replace";
    const octal = options.mode !== undefined ? (options.mode & 0o7777).toString(8) : "";
    await this.run(SCRIPTS.write, [target, mode, octal], target, "write", data);
  }

  /** Null for a missing path (or one under a file): lstat semantics. */
  async stat(target: string): Promise<FileStat | null> {
    try {
      return parseStat(await this.run(SCRIPTS.stat, [target], target, "stat"));
    } catch (error) {
      if (isAppError(error) && (error.code === "NOT_FOUND" || error.message.startsWith("Not a dir"))) {
        return null;
      }
      throw error;
    }
  }

  async list(target: string): Promise<DirEntry[]> {
    return parseList(await this.run(SCRIPTS.list, [target], target, "list"));
  }

  async mkdir(target: string): Promise<void> {
    await this.run(SCRIPTS.mkdir, [target], target, "mkdir");
  }

  async remove(target: string): Promise<void> {
    await this.run(SCRIPTS.remove, [target], target, "remove");
  }

  async move(source: string, target: string): Promise<void> {
    await this.run(SCRIPTS.move, [source, target], source, "move");
  }

  async realpath(target: string): Promise<string | null> {
    const result = await this.runner.run(["/bin/sh", "-c", SCRIPTS.realpath, "realpath", target], {
      maxBytes: 64 * 1024,
    });
    return result.exitCode === 0 ? result.stdout.replace(/\n$/, "") : null;
  }

  async putArchive(target: string, archive: Readable): Promise<void> {
    await this.run(SCRIPTS.untar, [target], target, "extract", archive);
  }

  getArchive(target: string): Promise<Readable> {
    return this.stream(SCRIPTS.tar, [target], target, "archive");
  }

  /** Runs a file script to completion; resolves with its stdout, rejects with the mapped AppError. */
  private async run(
    script: string,
    args: string[],
    reportedPath: string,
    action: string,
    stdin?: Readable | Uint8Array | string,
  ): Promise<string> {
    const result = await this.runner.run(["/bin/sh", "-c", script, action, ...args], {
      ...(stdin === undefined ? {} : { stdin }),
      maxBytes: SCRIPT_OUTPUT_CAP,
    });
    if (result.exitCode !== 0) throw scriptError(result.exitCode, result.stderr, reportedPath, action);
    return result.stdout;
  }

  /** A script's stdout as a stream, with backpressure (file-scripts.ts). */
  private stream(script: string, args: string[], reportedPath: string, action: string): Promise<Readable> {
    return streamScriptOutput(
      (sink) => this.runner.start(["/bin/sh", "-c", script, action, ...args], sink),
      reportedPath,
      action,
    );
  }
}
