import path from "node:path";
import type { Readable } from "node:stream";
import type { Sandbox } from "e2b";
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
import { execInSandbox, runChore } from "./e2b-commands";
import { FRAMING_PROBE, parseFramingProbe, type OutputFraming } from "./e2b-output-framing";
import { openE2bPty } from "./e2b-pty";
import type { E2bClient } from "./e2b-client";
import type { E2bDriverConfig } from "./e2b-config";
import { E2bFiles } from "./e2b-files";
import type { RunningGateway } from "./e2b-gateway";
import type { SandboxKeepAlive } from "./e2b-keepalive";

/**
 * One workspace inside an E2B sandbox. Commands run as the template's user in the workdir through
 * `sandbox.commands`; files go through the SDK's files API (e2b-files.ts). Every operation keeps the
 * sandbox's E2B timeout ahead of it, and a running command holds it fresh until it ends, so E2B never
 * pauses or kills the sandbox mid-turn.
 */
export class E2bMachine implements WorkspaceMachine {
  readonly workdir: string;
  private readonly files: E2bFiles;
  private closed = false;
  /** Learnt on the first exec of this attachment (the template decides whether Perl is there). */
  private framing: Promise<OutputFraming> | null = null;

  constructor(
    readonly sandbox: Sandbox,
    private readonly config: E2bDriverConfig,
    private readonly keepAlive: SandboxKeepAlive,
    readonly gateway: RunningGateway,
    /** The control plane of the team the sandbox is in (the tenant's or the installation's). */
    readonly client: E2bClient,
  ) {
    this.workdir = config.workdir;
    this.files = new E2bFiles(sandbox, {
      user: config.user,
      requestTimeoutMs: config.requestTimeoutMs,
      choreTimeoutMs: config.choreTimeoutMs,
    });
  }

  get sandboxId(): string {
    return this.sandbox.sandboxId;
  }

  /** True while envd answers; a paused, killed or expired sandbox answers 502 at the edge. Never throws. */
  async isAlive(): Promise<boolean> {
    if (this.closed) return false;
    try {
      return await this.sandbox.isRunning({
        requestTimeoutMs: Math.min(this.config.requestTimeoutMs, 5_000),
      });
    } catch {
      return false;
    }
  }

  async exec(command: readonly string[], options: ExecOptions = {}): Promise<ExecResult> {
    const cwd = options.cwd === undefined ? this.workdir : this.resolve(options.cwd);
    return this.run(async () =>
      execInSandbox(
        this.sandbox,
        command,
        {
          user: this.config.user,
          cwd,
          env: this.config.env,
          requestTimeoutMs: this.config.requestTimeoutMs,
          framing: await this.outputFraming(),
        },
        options,
      ),
    );
  }

  private outputFraming(): Promise<OutputFraming> {
    this.framing ??= runChore(this.sandbox, FRAMING_PROBE, [], {
      user: this.config.user,
      timeoutMs: 30_000,
      requestTimeoutMs: this.config.requestTimeoutMs,
    }).then(
      (result) => parseFramingProbe(result.stdout),
      (error: unknown) => {
        this.framing = null; // a failed probe (envd hiccup) is asked again next time
        throw error;
      },
    );
    return this.framing;
  }

  /** A terminal through the SDK's PTY API (e2b-pty.ts); the sandbox is kept fresh while it is open. */
  async openPty(options: PtyOptions): Promise<PtyProcess> {
    if (this.closed) throw new AppError("UNAVAILABLE", "The workspace sandbox was closed");
    await this.keepAlive.touch();
    const cwd = options.cwd === undefined ? this.workdir : this.resolve(options.cwd);
    const settings = {
      user: this.config.user,
      cwd,
      env: this.config.env,
      requestTimeoutMs: this.config.requestTimeoutMs,
    };
    return openE2bPty(this.sandbox, settings, options, this.keepAlive.hold());
  }

  readFile(p: string, options: { start?: number; end?: number } = {}): Promise<Readable> {
    return this.run(() => this.files.readFile(this.resolve(p), options));
  }

  writeFile(p: string, data: Readable | Uint8Array | string, options: WriteFileOptions = {}): Promise<void> {
    return this.run(() => this.files.writeFile(this.resolve(p), data, options));
  }

  stat(p: string): Promise<FileStat | null> {
    return this.run(() => this.files.stat(this.resolve(p)));
  }

  list(p: string): Promise<DirEntry[]> {
    return this.run(() => this.files.list(this.resolve(p)));
  }

  mkdir(p: string): Promise<void> {
    return this.run(() => this.files.mkdir(this.resolve(p)));
  }

  remove(p: string): Promise<void> {
    return this.run(() => this.files.remove(this.resolve(p)));
  }

  move(from: string, to: string): Promise<void> {
    return this.run(() => this.files.move(this.resolve(from), this.resolve(to)));
  }

  realpath(p: string): Promise<string | null> {
    return this.run(() => this.files.realpath(this.resolve(p)));
  }

  putArchive(dir: string, tar: Readable): Promise<void> {
    return this.run(() => this.files.putArchive(this.resolve(dir), tar));
  }

  getArchive(p: string): Promise<Readable> {
    return this.run(() => this.files.getArchive(this.resolve(p)));
  }

  /** Releases this process' hold (keepalive timer, gateway connections); the sandbox keeps running. */
  close(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.closed = true;
    this.keepAlive.close();
    this.gateway.transport.close();
    return Promise.resolve();
  }

  private resolve(p: string): string {
    if (p.includes("\0")) throw new AppError("BAD_REQUEST", "Path contains a NUL byte");
    return path.posix.resolve(this.workdir, p);
  }

  private async run<T>(operation: () => Promise<T>): Promise<T> {
    if (this.closed) throw new AppError("UNAVAILABLE", "The workspace sandbox was closed");
    await this.keepAlive.touch();
    const release = this.keepAlive.hold();
    try {
      return await operation();
    } finally {
      release();
    }
  }
}
