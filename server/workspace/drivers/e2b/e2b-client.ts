import { Sandbox, type ConnectionOpts, type SandboxInfo, type SandboxMetrics } from "e2b";
import type { E2bDriverConfig } from "./e2b-config";
import { isSandboxGone, toAppError } from "./e2b-errors";

/** A listed sandbox, the part of `SandboxInfo` the driver uses. */
export type ListedSandbox = Pick<
  SandboxInfo,
  "sandboxId" | "metadata" | "startedAt" | "endAt" | "state" | "cpuCount" | "memoryMB"
>;

/**
 * The E2B control plane through the SDK, with this installation's connection options on every call and
 * every failure as an AppError. `requestTimeoutMs` is always explicit: the SDK's own default is 60 s.
 */
export class E2bClient {
  readonly connection: ConnectionOpts;

  constructor(private readonly config: E2bDriverConfig) {
    this.connection = {
      apiKey: config.apiKey,
      requestTimeoutMs: config.requestTimeoutMs,
      ...(config.domain ? { domain: config.domain } : {}),
      ...(config.apiUrl ? { apiUrl: config.apiUrl } : {}),
      ...(config.sandboxUrl ? { sandboxUrl: config.sandboxUrl } : {}),
    };
  }

  /** Every sandbox (running or paused) whose metadata has all of `metadata`, across pages. */
  async list(metadata: Record<string, string>): Promise<ListedSandbox[]> {
    const paginator = Sandbox.list({
      ...this.connection,
      query: { metadata, state: ["running", "paused"] },
      limit: 100,
    });
    const found: ListedSandbox[] = [];
    try {
      while (paginator.hasNext) found.push(...(await paginator.nextItems()));
    } catch (error) {
      throw toAppError(error, "list sandboxes");
    }
    return found;
  }

  /** The sandbox's info, or null when E2B does not know it (killed, expired). */
  async info(sandboxId: string): Promise<SandboxInfo | null> {
    try {
      return await Sandbox.getInfo(sandboxId, this.connection);
    } catch (error) {
      if (isSandboxGone(error)) return null;
      throw toAppError(error, "get sandbox info", { sandboxId });
    }
  }

  async create(metadata: Record<string, string>, timeoutMs: number): Promise<Sandbox> {
    try {
      return await Sandbox.create(this.config.template, {
        ...this.connection,
        metadata,
        timeoutMs,
        lifecycle: { onTimeout: this.config.onTimeout },
        allowInternetAccess: this.config.allowInternetAccess,
        // Exposed ports (the MCP gateway's) answer only requests carrying the sandbox's traffic token.
        network: { allowPublicTraffic: false },
      });
    } catch (error) {
      throw toAppError(error, `create a sandbox from template ${this.config.template}`);
    }
  }

  /** Connects (resuming a paused sandbox); null when it no longer exists. */
  async connect(sandboxId: string, timeoutMs: number): Promise<Sandbox | null> {
    try {
      return await Sandbox.connect(sandboxId, { ...this.connection, timeoutMs });
    } catch (error) {
      if (isSandboxGone(error)) return null;
      throw toAppError(error, "connect to the sandbox", { sandboxId });
    }
  }

  /** Pauses; false when it was already paused or is gone. */
  async pause(sandboxId: string): Promise<boolean> {
    try {
      return await Sandbox.pause(sandboxId, { ...this.connection, keepMemory: this.config.pauseKeepsMemory });
    } catch (error) {
      if (isSandboxGone(error)) return false;
      throw toAppError(error, "pause the sandbox", { sandboxId });
    }
  }

  /** Kills; false when it was already gone. */
  async kill(sandboxId: string): Promise<boolean> {
    try {
      return await Sandbox.kill(sandboxId, this.connection);
    } catch (error) {
      throw toAppError(error, "kill the sandbox", { sandboxId });
    }
  }

  /** The metrics E2B collected from the sandbox since `start` (oldest first); null when it is gone. */
  async metrics(sandboxId: string, start: Date): Promise<SandboxMetrics[] | null> {
    try {
      return await Sandbox.getMetrics(sandboxId, { ...this.connection, start });
    } catch (error) {
      if (isSandboxGone(error)) return null;
      throw toAppError(error, "read the sandbox metrics", { sandboxId });
    }
  }

  /** Sets the timeout from now; false when the sandbox is not running any more. */
  async setTimeout(sandboxId: string, timeoutMs: number): Promise<boolean> {
    try {
      await Sandbox.setTimeout(sandboxId, timeoutMs, this.connection);
      return true;
    } catch (error) {
      if (isSandboxGone(error)) return false;
      throw toAppError(error, "set the sandbox timeout", { sandboxId });
    }
  }
}
