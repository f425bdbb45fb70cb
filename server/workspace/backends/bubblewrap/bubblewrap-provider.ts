import { DEFAULT_MCP_NETWORK_POLICY, type McpNetworkPolicy } from "@/server/workspace/mcp/mcp-network-policy";
import fs from "node:fs/promises";
import path from "node:path";
import { AppError } from "@/server/shared/errors";
import type { WorkspaceBackend } from "@/server/workspace/backend/port";
import { workspaceVanished } from "@/server/workspace/backend/vanished";
import { isDirectory } from "@/server/workspace/backends/local/local-backend";
import { safePathSegment } from "@/server/workspace/backends/local/local-provider";
import type { McpConnector } from "@/server/workspace/mcp/types";
import { isInside } from "@/server/workspace/paths";
import type { BackendProvider, WorkspaceSpec } from "@/server/workspace/backend/driver";
import { BubblewrapBackend } from "./bubblewrap-backend";
import { sandboxIdentity, sandboxKey } from "./sandbox-args";
import { assertTraversable, traversableTree } from "./sandbox-dirs";
import { SandboxMcpConnector } from "./sandbox-mcp-connector";
import { ZSandboxConfig, type TSandboxConfig, type TSandboxConfigInput } from "./sandbox-config";
import { detectCgroups, workspaceCgroupUsage } from "./sandbox-cgroup";
import { SandboxRegistry } from "./sandbox-registry";

type Owner = Pick<WorkspaceSpec, "tenantId" | "userId" | "workspaceId">;

/**
 * Host folders `<basedir>/<tenant>/<user>/<workspaceId>` (the local layout, so switching between this and
 * `host-unconfined` keeps the data), each owned by its workspace uid and seen by its sandboxes at
 * /workspace. MCP declarations connect through a gateway running in the workspace's sandbox.
 */
export class BubblewrapBackendProvider implements BackendProvider {
  readonly kind = "local" as const;
  readonly persistent = true;
  /** Only Berth stops or deletes its host folders (one deleted outside Berth is noticed on use). */
  readonly mayVanish = false;
  readonly config: TSandboxConfig;
  readonly registry: SandboxRegistry;
  private readonly basedir: string;

  constructor(options: { basedir: string; sandbox?: TSandboxConfigInput }) {
    if (!path.isAbsolute(options.basedir)) {
      throw new AppError("BAD_REQUEST", `basedir must be absolute: ${options.basedir}`);
    }
    this.basedir = path.resolve(options.basedir);
    this.config = ZSandboxConfig.parse(options.sandbox ?? {});
    this.registry = new SandboxRegistry(this.config.runtimeRoot, detectCgroups(this.config.memoryLimitBytes));
  }

  workdirFor(spec: Owner): string {
    return path.join(
      this.basedir,
      safePathSegment(spec.tenantId),
      safePathSegment(spec.userId),
      safePathSegment(spec.workspaceId),
    );
  }

  keyOf(spec: Owner): string {
    return sandboxKey(spec);
  }

  /** Attaches; a folder provisioned before (a stored handle) that is missing vanished (see LocalBackendProvider). */
  async provision(spec: WorkspaceSpec): Promise<BubblewrapBackend> {
    if (spec.handle && !(await isDirectory(this.workdirFor(spec)))) throw workspaceVanished();
    return this.create(spec);
  }

  /** Creates the folder if missing and returns its backend (the machine controller's provision). */
  async create(spec: WorkspaceSpec): Promise<BubblewrapBackend> {
    const workdir = this.workdirFor(spec);
    // Only the workspace folder belongs to the workspace uid (0700). The levels above stay Berth's and
    // traverse-only (0711): bwrap, running as the workspace uid, must reach the folder to mount it, and
    // nobody can list the tenants, users or workspaces.
    await traversableTree(this.basedir, path.dirname(workdir));
    await assertTraversable(this.basedir);
    await fs.mkdir(workdir, { recursive: true, mode: 0o700 });
    const real = await fs.realpath(workdir);
    if (!isInside(await fs.realpath(this.basedir), real)) {
      throw new AppError("FORBIDDEN", `Workspace directory escapes the base directory: ${workdir}`);
    }
    const key = sandboxKey(spec);
    const identity = sandboxIdentity(this.config, key);
    if (identity.dropped) {
      const info = await fs.stat(real);
      if (info.uid !== identity.uid) await fs.chown(real, identity.uid, identity.gid);
    }
    return new BubblewrapBackend({
      config: this.config,
      hostWorkdir: real,
      key,
      identity,
      registry: this.registry,
    });
  }

  async isAlive(backend: WorkspaceBackend): Promise<boolean> {
    return backend instanceof BubblewrapBackend && (await isDirectory(backend.hostWorkdir));
  }

  createMcpConnector(
    backend: WorkspaceBackend,
    _spec?: unknown,
    options?: { network: McpNetworkPolicy },
  ): Promise<McpConnector> {
    if (!(backend instanceof BubblewrapBackend)) {
      return Promise.reject(
        new AppError("INTERNAL", "This backend was not provisioned by the sandbox provider"),
      );
    }
    return Promise.resolve(new SandboxMcpConnector(backend, options?.network ?? DEFAULT_MCP_NETWORK_POLICY));
  }

  /** This process' sandboxes of the backend end with close (its gateway, and with it its MCP servers). */
  async teardown(backend: WorkspaceBackend, options: { purge: boolean }): Promise<void> {
    await backend.close();
    if (options.purge && backend instanceof BubblewrapBackend) {
      await this.registry.killAll(backend.options.key);
      await fs.rm(backend.hostWorkdir, { recursive: true, force: true });
    }
  }

  /** The workspace's memory group now (every Berth process' sandboxes of it), null without cgroups. */
  cgroupUsage(spec: Owner) {
    return workspaceCgroupUsage(this.registry.cgroups, sandboxKey(spec));
  }

  /** Ends every sandbox of the workspace, whichever Berth process started it (workspace.stop/purge). */
  stopAll(spec: Owner): Promise<number> {
    return this.registry.killAll(sandboxKey(spec));
  }
}
