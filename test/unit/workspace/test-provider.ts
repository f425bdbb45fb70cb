import type { BackendKind, WorkspaceBackend } from "@/server/workspace/backend/port";
import { LocalBackendProvider } from "@/server/workspace/backends/local/local-provider";
import type { BackendProvider, WorkspaceSpec } from "@/server/workspace/backend/driver";

/**
 * A real provider (host directories) with knobs for manager tests: counts calls, can fail, can hold every
 * provision at a barrier, and can report backends dead. Nothing is faked below the provider port.
 */
export class TestProvider implements BackendProvider {
  readonly persistent = true;
  readonly mayVanish: boolean;
  readonly inner: LocalBackendProvider;
  provisions: WorkspaceSpec[] = [];
  teardowns: Array<{ workdir: string; purge: boolean }> = [];
  failuresLeft = 0;
  /** The next provisioned backend fails its first mkdir, so Workspace.initialize fails after provisioning. */
  breakNextLayout = false;
  readonly dead = new Set<WorkspaceBackend>();
  private barrier: { size: number; waiting: Array<() => void> } | null = null;
  /** Highest number of provision calls in flight at once. */
  maxConcurrent = 0;
  private inFlight = 0;

  constructor(
    basedir: string,
    readonly kind: BackendKind = "local",
  ) {
    this.inner = new LocalBackendProvider({ basedir });
    this.mayVanish = kind !== "local";
  }

  /** Every provision waits until `size` provisions are waiting at once, then all proceed. */
  holdUntil(size: number): void {
    this.barrier = { size, waiting: [] };
  }

  async provision(spec: WorkspaceSpec): Promise<WorkspaceBackend> {
    this.provisions.push(spec);
    this.inFlight++;
    this.maxConcurrent = Math.max(this.maxConcurrent, this.inFlight);
    try {
      if (this.barrier) {
        const barrier = this.barrier;
        await new Promise<void>((resolve) => {
          barrier.waiting.push(resolve);
          if (barrier.waiting.length >= barrier.size) barrier.waiting.forEach((release) => release());
        });
      }
      if (this.failuresLeft > 0) {
        this.failuresLeft--;
        throw new Error("provision failed on purpose");
      }
      const backend = await this.inner.provision(spec);
      if (this.breakNextLayout) {
        this.breakNextLayout = false;
        backend.mkdir = () => Promise.reject(new Error("disk full"));
      }
      // Pretend to be the requested kind so liveness checks apply; isolated stays false (it is the host).
      return Object.assign(backend, { kind: this.kind });
    } finally {
      this.inFlight--;
    }
  }

  async isAlive(backend: WorkspaceBackend): Promise<boolean> {
    return !this.dead.has(backend) && (await this.inner.isAlive(backend));
  }

  async teardown(backend: WorkspaceBackend, options: { purge: boolean }): Promise<void> {
    this.teardowns.push({ workdir: backend.workdir, purge: options.purge });
    await this.inner.teardown(backend, options);
  }
}
