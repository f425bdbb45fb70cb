import { Readable } from "node:stream";
import { AppError } from "@/server/shared/errors";
import type { DirEntry, ExecResult, FileStat, WorkspaceBackend } from "@/server/workspace/backend/port";
import type { BackendProvider } from "@/server/workspace/backend/driver";

/**
 * A backend that stores nothing, for benchmarks that measure the manager's own bookkeeping with 100,000
 * cached workspaces (100,000 real directories would measure the filesystem instead). Never used by tests.
 */
class NullBackend implements WorkspaceBackend {
  readonly kind = "local" as const;
  readonly isolated = false;
  constructor(readonly workdir: string) {}
  exec(): Promise<ExecResult> {
    return Promise.resolve({
      exitCode: 0,
      stdout: Buffer.alloc(0),
      stderr: Buffer.alloc(0),
      timedOut: false,
      killed: false,
      truncated: false,
    });
  }
  readFile(path: string): Promise<Readable> {
    return Promise.reject(new AppError("NOT_FOUND", `No such file: ${path}`));
  }
  async writeFile(): Promise<void> {}
  stat(): Promise<FileStat | null> {
    return Promise.resolve(null);
  }
  list(): Promise<DirEntry[]> {
    return Promise.resolve([]);
  }
  async mkdir(): Promise<void> {}
  async remove(): Promise<void> {}
  async move(): Promise<void> {}
  realpath(path: string): Promise<string | null> {
    return Promise.resolve(path);
  }
  async putArchive(): Promise<void> {}
  getArchive(): Promise<Readable> {
    return Promise.resolve(Readable.from([]));
  }
  async close(): Promise<void> {}
}

export class NullProvider implements BackendProvider {
  readonly kind = "local" as const;
  readonly persistent = false;
  provision(spec: { workspaceId: string }): Promise<WorkspaceBackend> {
    return Promise.resolve(new NullBackend(`/null/${spec.workspaceId}`));
  }
  isAlive(): Promise<boolean> {
    return Promise.resolve(true);
  }
  async teardown(): Promise<void> {}
}
