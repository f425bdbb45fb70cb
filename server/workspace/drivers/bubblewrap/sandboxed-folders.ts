import { DEFAULT_MCP_NETWORK_POLICY, type McpNetworkPolicy } from "@/server/workspace/mcp/mcp-network-policy";
import fs from "node:fs/promises";
import path from "node:path";
import { AppError } from "@/server/shared/errors";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import { workspaceVanished } from "@/server/workspace/drivers/vanished";
import { isDirectory } from "@/server/workspace/drivers/host-folder/host-folder-machine";
import { workspaceFolder } from "@/server/workspace/drivers/host-folder/folder-layout";
import type { McpConnector } from "@/server/workspace/mcp/types";
import { isInside } from "@/server/workspace/paths";
import type { WorkspaceSpec } from "@/server/workspace/drivers/driver";
import { BubblewrapMachine } from "./bubblewrap-machine";
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
export class SandboxedFolders {
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
    return workspaceFolder(this.basedir, spec);
  }

  keyOf(spec: Owner): string {
    return sandboxKey(spec);
  }

  /** Attaches; a folder created before (a stored handle) that is missing vanished (see HostFolders). */
  async attach(spec: WorkspaceSpec): Promise<BubblewrapMachine> {
    if (spec.handle && !(await isDirectory(this.workdirFor(spec)))) throw workspaceVanished();
    return this.open(spec);
  }

  /** Creates the folder if missing and returns its machine (what the driver's `create` does). */
  async open(spec: WorkspaceSpec): Promise<BubblewrapMachine> {
    const workdir = this.workdirFor(spec);
    await this.makeParents(path.dirname(workdir));
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
    return new BubblewrapMachine({
      config: this.config,
      hostWorkdir: real,
      key,
      identity,
      registry: this.registry,
    });
  }

  /**
   * Only the workspace folder belongs to the workspace uid (0700). The levels above stay Berth's and
   * traverse-only (0711): bwrap, running as the workspace uid, must reach the folder to mount it, and
   * nobody can list the tenants, users or workspaces.
   */
  async makeParents(dir: string): Promise<void> {
    await traversableTree(this.basedir, dir);
    await assertTraversable(this.basedir);
  }

  /** A folder moved in from a warm pool (Berth's, empty) becomes the workspace uid's: one chown. */
  async handOver(spec: Owner, folder: string): Promise<void> {
    const identity = sandboxIdentity(this.config, sandboxKey(spec));
    if (identity.dropped) await fs.chown(folder, identity.uid, identity.gid);
  }

  async isAlive(machine: WorkspaceMachine): Promise<boolean> {
    return machine instanceof BubblewrapMachine && (await isDirectory(machine.hostWorkdir));
  }

  connectMcp(machine: WorkspaceMachine, options?: { network: McpNetworkPolicy }): Promise<McpConnector> {
    if (!(machine instanceof BubblewrapMachine)) {
      return Promise.reject(
        new AppError("INTERNAL", "This machine was not attached by the bubblewrap driver"),
      );
    }
    return Promise.resolve(new SandboxMcpConnector(machine, options?.network ?? DEFAULT_MCP_NETWORK_POLICY));
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
