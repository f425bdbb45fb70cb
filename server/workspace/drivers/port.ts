import type { EgressGrant, EgressLease } from "@/server/workspace/egress/machine-egress";
import type { Duplex, Readable } from "node:stream";
import type { BackendKind } from "./kind";

/**
 * The live machine of one workspace, as a driver's `attach` returns it (driver.ts): what a workspace needs
 * from the host folder, container, sandbox or Pod it runs on. Facts about the backend (kind, isolation,
 * capabilities) are the driver's, not the machine's. Paths are POSIX paths as seen by the machine;
 * relative paths resolve against `workdir`. Implementations must never buffer a whole file or archive in
 * memory: data moves as streams.
 */

export interface WorkspaceMachine {
  /** Absolute path of the workspace root as seen by the machine (e.g. `/workspace` in a container). */
  readonly workdir: string;

  /** Runs argv without a shell. Output is streamed through the callbacks and also collected (capped). */
  exec(command: readonly string[], options?: ExecOptions): Promise<ExecResult>;

  /**
   * Streams a file's bytes. Rejects with AppError NOT_FOUND when the path does not exist and BAD_REQUEST
   * when it is a directory. `start` and `end` are byte offsets, both INCLUSIVE (fs.createReadStream semantics).
   */
  readFile(path: string, options?: { start?: number; end?: number }): Promise<Readable>;
  /** Writes a file from a stream (or bytes), creating parent directories. Replaces atomically where possible. */
  writeFile(path: string, data: Readable | Uint8Array | string, options?: WriteFileOptions): Promise<void>;
  /** Null when the path does not exist. Does not follow a final symlink (lstat semantics). */
  stat(path: string): Promise<FileStat | null>;
  /** Entries of a directory (non-recursive). Rejects with NOT_FOUND when the directory does not exist. */
  list(path: string): Promise<DirEntry[]>;
  /** mkdir -p. */
  mkdir(path: string): Promise<void>;
  /** rm -rf; a silent no-op when the path is missing. */
  remove(path: string): Promise<void>;
  /** Renames within the backend, replacing the destination file if present. */
  move(from: string, to: string): Promise<void>;
  /** Resolves symlinks; null when the path does not exist. Used to confine file tools to the workdir. */
  realpath(path: string): Promise<string | null>;

  /**
   * The host filesystem path of a backend path, for a backend whose files are this host's files (the local
   * backend). Lets bulk writers such as archive installs write directly instead of through a tar round
   * trip. Absent on sandboxed backends, whose files must go through the backend.
   */
  hostPath?(path: string): string;

  /**
   * Extracts an uncompressed tar stream into `dir` (created if missing), as the workspace user: permission
   * bits exactly as the archive says (not narrowed by a umask: a checkpoint restore depends on it), the
   * owner never. Trusted input only: callers validate (skill installs re-pack with 0644/0755).
   */
  putArchive(dir: string, tar: Readable): Promise<void>;
  /** Streams `path` (file or directory) as an uncompressed tar whose single top entry is its basename. */
  getArchive(path: string): Promise<Readable>;

  /**
   * An interactive command on a pseudo-terminal (the dashboard's terminal), confined exactly like `exec`.
   * Absent on backends that cannot offer one (`capabilities.pty` says which). Interactive: no timeout; the
   * caller ends it with `kill()` (and a stop or purge of the machine ends it too).
   */
  openPty?(options: PtyOptions): Promise<PtyProcess>;

  /**
   * A raw TCP connection to 127.0.0.1:`port` as seen INSIDE the machine (a preview URL's traffic), resolved
   * once connected. Absent where the backend cannot reach the machine's loopback (`capabilities.previews`).
   * Refusals are AppErrors: BAD_GATEWAY with `details.reason: "port_not_listening"` when nothing listens,
   * UNPROCESSABLE `gateway_predates_previews` for a gateway too old to tunnel. The caller ends it (destroy).
   * Opening one is not work: it takes no lease and moves no idle clock.
   */
  openTunnel?(port: number): Promise<Duplex>;

  /**
   * Egress through Berth's proxy for the commands that carry the returned `env` (server/workspace/egress/):
   * while the lease is open, such a command reaches the network as `grant` allows, through a forwarder in
   * front of it. Absent where the backend has no proxy (E2B, Kubernetes: their commands get no egress).
   */
  openEgress?(grant: EgressGrant): Promise<EgressLease>;

  /** Releases connections; does not delete data. Idempotent. */
  close(): Promise<void>;
}

/** The shell a terminal runs when the caller names none: bash where the machine has it, else sh. */
export const DEFAULT_PTY_COMMAND: readonly string[] = [
  "/bin/sh",
  "-c",
  "if command -v bash >/dev/null 2>&1; then exec bash -il; else exec sh -i; fi",
];

export type PtyOptions = {
  /** argv of the interactive program; DEFAULT_PTY_COMMAND when absent. */
  command?: readonly string[];
  cols: number;
  rows: number;
  /** Working directory; defaults to the backend's workdir. */
  cwd?: string;
  env?: Record<string, string>;
};

/** A running program on a terminal. Output carries stdout and stderr merged, as a terminal shows them. */
export interface PtyProcess {
  /** Everything the program writes to its terminal; ends when the program's side of the terminal closes. */
  readonly output: Readable;
  /** Settles once the program ended: its exit code (-1 when the backend cannot tell or it was killed). */
  readonly exited: Promise<{ exitCode: number }>;
  /** Keystrokes (bytes as the terminal sends them). Ignored after the program ended. */
  write(data: string | Uint8Array): void;
  /** The terminal's new size; the program sees it (`stty size`, SIGWINCH) like a window resize. */
  resize(cols: number, rows: number): Promise<void>;
  /** Ends the program and everything it started on the terminal. Idempotent; resolves once it is gone. */
  kill(): Promise<void>;
}

export type WriteFileOptions = {
  mode?: number;
  /**
   * Append to the file (created if missing). One call's bytes must land contiguously at any size, also
   * against other processes' appends (O_APPEND plus an exclusive flock held for the call).
   */
  append?: boolean;
  /**
   * Create only: reject with AppError CONFLICT when the path already exists, atomically (no check-then-write
   * race). Used to pick `tool_result-<id>(n).txt` names. Not combinable with `append`.
   */
  exclusive?: boolean;
};

/**
 * What a workspace record stores as its backend (drivers of one kind share its machines): a driver
 * definition's `kind`. The driver registry is the only list of kinds (`ZBackendKind` in ./kind.ts checks
 * the form at boundaries, the installation's DriverSet whether it runs the kind).
 */
export type { BackendKind };

export type ExecOptions = {
  /** Working directory; defaults to the backend's workdir. */
  cwd?: string;
  env?: Record<string, string>;
  /** Milliseconds; on expiry the process (group) is killed and `timedOut` is true. */
  timeoutMs?: number;
  /** Aborting kills the process (group); the result has `killed: true`. */
  signal?: AbortSignal;
  /** Bytes written to the process' stdin, then stdin is closed. */
  stdin?: Readable | Uint8Array | string;
  onStdout?: (chunk: Buffer) => void;
  onStderr?: (chunk: Buffer) => void;
  /** Cap on the bytes of each stream kept in the result (the callbacks still see everything). Default 10 MiB. */
  maxBufferBytes?: number;
};

export type ExecResult = {
  /** Process exit code; -1 when it timed out, was killed or could not report one. 127 when it could not start. */
  exitCode: number;
  stdout: Buffer;
  stderr: Buffer;
  timedOut: boolean;
  killed: boolean;
  /** True when stdout or stderr exceeded maxBufferBytes and was cut. */
  truncated: boolean;
};

export type FileStat = {
  type: "file" | "directory" | "symlink" | "other";
  size: number;
  mtimeMs: number;
  mode: number;
};

export type DirEntry = {
  name: string;
  type: FileStat["type"];
  /** Null for directories. */
  size: number | null;
  mtimeMs: number | null;
};
