import { Readable } from "node:stream";
import { AppError } from "@/server/shared/errors";
import type { DirEntry, ExecResult, FileStat, WorkspaceMachine } from "@/server/workspace/drivers/port";
import type { AttachedMachine, MachineAttacher, WorkspaceDriver } from "@/server/workspace/drivers/driver";

/**
 * A backend that stores nothing, for benchmarks that measure the manager's own bookkeeping with 100,000
 * cached workspaces (100,000 real directories would measure the filesystem instead). Never used by tests.
 */
class NullBackend implements WorkspaceMachine {
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

/** A driver whose machines are NullBackends: nothing to create, stop or delete. */
const NULL_DRIVER: WorkspaceDriver = {
  name: "null",
  kind: "local",
  summary: "stores nothing (benchmarks only)",
  persistent: false,
  isolation: { isolated: false, sandbox: null },
  capabilities: {
    hostPaths: false,
    pauseKeepsMemory: false,
    gateway: "host",
    mayVanish: false,
    pty: false,
    previews: false,
    warmPool: false,
  },
  create: () => Promise.resolve({}),
  stop: async () => {},
  purge: () => Promise.resolve([]),
  exists: () => Promise.resolve(true),
  listResources: () => Promise.resolve([]),
  reap: async () => {},
  attach: (spec) => Promise.resolve(new NullBackend(`/null/${spec.workspaceId}`)),
  isAlive: () => Promise.resolve(true),
  detach: async () => {},
};

export class NullAttacher implements MachineAttacher {
  readonly mayVanish = false;
  attach(spec: { workspaceId: string }): Promise<AttachedMachine> {
    return Promise.resolve({ driver: NULL_DRIVER, machine: new NullBackend(`/null/${spec.workspaceId}`) });
  }
}
