import fs from "node:fs/promises";
import path from "node:path";
import { LocalBackendProvider, safePathSegment } from "@/server/workspace/backends/local/local-provider";
import type { WorkspaceSpec } from "@/server/workspace/provider";
import { BubblewrapBackendProvider } from "@/server/workspace/backends/bubblewrap/bubblewrap-provider";
import type { TSandboxConfigInput } from "@/server/workspace/backends/bubblewrap/sandbox-config";
import type { BackendIsolation, MachineController, MachineResource } from "./machine";

export type LocalMachineOptions = {
  basedir: string;
  /**
   * `sandbox` (the default): every command and stdio MCP server runs under bubblewrap as the workspace's
   * own unprivileged uid (server/workspace/backends/bubblewrap). `host-unconfined`: on the host with
   * Berth's privileges, an explicit operator opt-in for trusted agents only.
   */
  confinement?: "sandbox" | "host-unconfined";
  sandbox?: TSandboxConfigInput;
  env?: Record<string, string>;
};

/**
 * Host folders `<basedir>/<tenant>/<user>/<workspaceId>` (the same layout whichever confinement runs
 * them, so switching keeps the data). Stopping ends every sandbox of the workspace, whichever process
 * started it (MCP gateways and their servers, commands still running); data always stays.
 */
export class LocalMachineController implements MachineController {
  readonly kind = "local" as const;
  readonly provider: LocalBackendProvider | BubblewrapBackendProvider;
  readonly isolation: BackendIsolation;
  private readonly sandboxed: BubblewrapBackendProvider | null;

  constructor(private readonly options: LocalMachineOptions) {
    if ((options.confinement ?? "sandbox") === "sandbox") {
      this.sandboxed = new BubblewrapBackendProvider({
        basedir: options.basedir,
        ...(options.sandbox ? { sandbox: options.sandbox } : {}),
      });
      this.provider = this.sandboxed;
      this.isolation = { backend: "local", isolated: true, sandbox: "bubblewrap" };
    } else {
      this.sandboxed = null;
      this.provider = new LocalBackendProvider({
        basedir: options.basedir,
        ...(options.env ? { env: options.env } : {}),
      });
      this.isolation = { backend: "host-unconfined", isolated: false, sandbox: null };
    }
  }

  async provision(spec: WorkspaceSpec): Promise<Record<string, unknown>> {
    const backend = await this.provider.provision(spec);
    await backend.close();
    return { kind: "local", workdir: this.provider.workdirFor(spec), isolated: this.isolation.isolated };
  }

  async stop(spec?: WorkspaceSpec): Promise<void> {
    // Unconfined commands are the host's own processes: nothing to find them by (trusted agents only).
    if (spec && this.sandboxed) await this.sandboxed.stopAll(spec);
  }

  async purge(spec: WorkspaceSpec): Promise<string[]> {
    const workdir = this.provider.workdirFor(spec);
    const existed = await fs.stat(workdir).then(
      () => true,
      () => false,
    );
    await this.stop(spec);
    await fs.rm(workdir, { recursive: true, force: true });
    return existed ? [`directory:${workdir}`] : [];
  }

  async exists(spec: WorkspaceSpec): Promise<boolean> {
    const info = await fs.stat(this.provider.workdirFor(spec)).catch(() => null);
    return info?.isDirectory() ?? false;
  }

  async listResources(): Promise<MachineResource[]> {
    const found: MachineResource[] = [];
    for (const tenant of await subdirectories(this.options.basedir)) {
      for (const user of await subdirectories(path.join(this.options.basedir, tenant))) {
        for (const workspace of await subdirectories(path.join(this.options.basedir, tenant, user))) {
          found.push({
            workspaceId: decodeSegment(workspace),
            tenantId: decodeSegment(tenant),
            locator: path.join(this.options.basedir, tenant, user, workspace),
          });
        }
      }
    }
    return found;
  }

  async reap(resource: MachineResource): Promise<void> {
    // Only ever delete inside basedir, three levels down, whatever the locator says.
    const relative = path.relative(this.options.basedir, resource.locator);
    if (relative.startsWith("..") || path.isAbsolute(relative) || relative.split(path.sep).length !== 3) {
      throw new Error(`refusing to reap ${resource.locator}: not a workspace folder under the basedir`);
    }
    await fs.rm(resource.locator, { recursive: true, force: true });
  }
}

async function subdirectories(dir: string): Promise<string[]> {
  const entries = await fs.readdir(dir, { withFileTypes: true }).catch(() => []);
  return entries.filter((entry) => entry.isDirectory()).map((entry) => entry.name);
}

/** Inverse of safePathSegment; null for hashed (overlong) names, which cannot be decoded. */
export function decodeSegment(segment: string): string | null {
  if (segment === "%") return "";
  if (segment.startsWith("%h")) return null;
  try {
    const decoded = decodeURIComponent(segment);
    return safePathSegment(decoded) === segment ? decoded : null;
  } catch {
    return null;
  }
}
