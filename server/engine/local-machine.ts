import fs from "node:fs/promises";
import path from "node:path";
import { LocalBackendProvider, safePathSegment } from "@/server/workspace/backends/local/local-provider";
import type { WorkspaceSpec } from "@/server/workspace/provider";
import type { MachineController, MachineResource } from "./machine";

/**
 * Host folders `<basedir>/<tenant>/<user>/<workspaceId>` (LocalBackendProvider's layout). Stopping has
 * nothing to stop on the host (no process outlives its command), so it only releases; data always stays.
 */
export class LocalMachineController implements MachineController {
  readonly kind = "local" as const;
  readonly provider: LocalBackendProvider;

  constructor(private readonly options: { basedir: string; env?: Record<string, string> }) {
    this.provider = new LocalBackendProvider({
      basedir: options.basedir,
      ...(options.env ? { env: options.env } : {}),
    });
  }

  async provision(spec: WorkspaceSpec): Promise<Record<string, unknown>> {
    const backend = await this.provider.provision(spec);
    await backend.close();
    return { kind: "local", workdir: backend.workdir };
  }

  async stop(_spec?: WorkspaceSpec): Promise<void> {
    // Nothing runs between commands on the host; the record's state is what "stopped" means here.
  }

  async purge(spec: WorkspaceSpec): Promise<string[]> {
    const workdir = this.provider.workdirFor(spec);
    const existed = await fs.stat(workdir).then(
      () => true,
      () => false,
    );
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
