import path from "node:path";
import { type Readable } from "node:stream";
import { AppError } from "@/server/shared/errors";
import type {
  DirEntry,
  ExecOptions,
  ExecResult,
  FileStat,
  PtyOptions,
  PtyProcess,
  WorkspaceMachine,
  WriteFileOptions,
} from "@/server/workspace/drivers/port";
import { ScriptFiles } from "@/server/workspace/drivers/exec-scripts/script-files";
import { runCommand, type PodExecutor } from "./pod-exec";
import { openPodPty } from "./pod-pty";
import { POD } from "./workspace-manifests";

export type KubernetesBackendOptions = {
  /** Exec into the Pod's `workspace` container (agent commands and file operations). */
  executor: PodExecutor;
  /** The Pod this backend was attached to (a replacement Pod of the same name is another machine). */
  podUid: string;
  /** A command's process group could not be killed at all: the driver deletes the Pod (the claim stays). */
  onUnkillable: () => Promise<void>;
  /** Releases this process' hold (the gateway tunnel); never stops the Pod. */
  onClose?: () => Promise<void>;
};

/**
 * The workspace backend inside a Kubernetes Pod. Every command and file operation is an exec over the API
 * server into the `workspace` container, as the Pod's non-root user: the container's permissions and path
 * resolution apply, and bytes stream both ways with backpressure (file contents and archives are never held
 * in memory; files are read and written by small shell scripts, archives by tar, and each call resolves only
 * when the remote side reported its exit status). Commands run in a session of their own, so a timeout or
 * abort kills the whole process tree through a second exec.
 */
export class KubernetesMachine implements WorkspaceMachine {
  readonly workdir = POD.workdir;
  private closed = false;
  /** File operations: exec scripts in the workspace container, as the Pod's user (exec-scripts/). */
  private readonly files: ScriptFiles;

  constructor(private readonly options: KubernetesBackendOptions) {
    const { executor } = options;
    this.files = new ScriptFiles({
      run: (argv, { stdin, maxBytes }) => {
        this.assertOpen();
        return executor.run(argv, stdin, { maxBytes });
      },
      start: async (argv, sink) => {
        this.assertOpen();
        const handle = await executor.start(argv, { sink });
        // Dropping the session is enough: the script dies on its broken pipe.
        return { resume: () => handle.resume(), abandon: () => handle.close(), finished: handle.finished };
      },
    });
  }

  get podName(): string {
    return this.options.executor.target.pod;
  }

  get podUid(): string {
    return this.options.podUid;
  }

  exec(command: readonly string[], options: ExecOptions = {}): Promise<ExecResult> {
    this.assertOpen();
    const cwd = options.cwd === undefined ? this.workdir : this.resolve(options.cwd);
    return runCommand(this.options.executor, command, {
      ...options,
      cwd,
      onUnkillable: this.options.onUnkillable,
    });
  }

  /** A terminal: `pods/exec` with a TTY in the workspace container (pod-pty.ts). */
  openPty(options: PtyOptions): Promise<PtyProcess> {
    this.assertOpen();
    const cwd = options.cwd === undefined ? this.workdir : this.resolve(options.cwd);
    return openPodPty(this.options.executor, { ...options, cwd, onUnkillable: this.options.onUnkillable });
  }

  readFile(p: string, options: { start?: number; end?: number } = {}): Promise<Readable> {
    return this.files.readFile(this.resolve(p), options);
  }

  writeFile(p: string, data: Readable | Uint8Array | string, options: WriteFileOptions = {}): Promise<void> {
    return this.files.writeFile(this.resolve(p), data, options);
  }

  stat(p: string): Promise<FileStat | null> {
    return this.files.stat(this.resolve(p));
  }

  list(p: string): Promise<DirEntry[]> {
    return this.files.list(this.resolve(p));
  }

  mkdir(p: string): Promise<void> {
    return this.files.mkdir(this.resolve(p));
  }

  remove(p: string): Promise<void> {
    return this.files.remove(this.resolve(p));
  }

  move(from: string, to: string): Promise<void> {
    return this.files.move(this.resolve(from), this.resolve(to));
  }

  realpath(p: string): Promise<string | null> {
    return this.files.realpath(this.resolve(p));
  }

  putArchive(dir: string, archive: Readable): Promise<void> {
    return this.files.putArchive(this.resolve(dir), archive);
  }

  getArchive(p: string): Promise<Readable> {
    return this.files.getArchive(this.resolve(p));
  }

  /** Releases this process' connections; the Pod and its data stay. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.options.onClose?.();
  }

  private assertOpen(): void {
    if (this.closed) throw new AppError("UNAVAILABLE", "The workspace backend was closed");
  }

  private resolve(p: string): string {
    if (p.includes("\0")) throw new AppError("BAD_REQUEST", "Path contains a NUL byte");
    return path.posix.resolve(this.workdir, p);
  }
}
