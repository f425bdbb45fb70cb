import { createHash, randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import { z } from "zod";
import { AppError } from "@/server/shared/errors";
import { parseJsonOrNull } from "@/server/shared/json";
import type { BackendHandle } from "@/server/workspace/drivers/driver";
import type { DockerWorkspaceRef, TDockerDriverConfig } from "./docker-config";
import { gatewayCredentialsPath } from "./docker-gateway";

/**
 * Where a warm pool machine lives (docker-warm-pool.ts), and its binding record: names, host paths and the
 * one file that says which workspace a pool machine was given to.
 */

/** A pool row's id (the seam: letters, digits and `-`): part of a container name and of host paths. */
export const ZPoolId = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9-]{0,62}$/, "not a pool machine id");

/** What `createIdleMachine` and `bindIdleMachine` return, and the workspace record then stores. */
export const ZPooledHandle = z.object({ container: z.string().min(1), pool: ZPoolId });

export type PoolBinding = z.infer<typeof ZPoolBinding>;

/**
 * Docker labels cannot change after create, so a pool container learns its workspace from this record on
 * the HOST, next to the gateway's credentials (never mounted into the container): listResources, reap,
 * purge and attach read it. `workdirIdentity` is the pool folder's `<dev>:<inode>`, which the rename into
 * the workspace's path keeps: a folder at that path with another identity is not the machine's.
 */
const ZPoolBinding = z.object({
  /** The machine's own id (its runtime dir's name may be a hash of it). */
  poolId: ZPoolId,
  tenantId: z.string(),
  userId: z.string(),
  workspaceId: z.string(),
  workdirIdentity: z.string().min(1),
  boundAt: z.string(),
});

/** The pool machine id a stored handle names, or null for a workspace's own container. */
export function poolIdOf(handle: BackendHandle | null | undefined): string | null {
  const parsed = ZPooledHandle.safeParse(handle);
  return parsed.success ? parsed.data.pool : null;
}

export function poolContainerName(id: string): string {
  return `berth-pool-${id}`;
}

export function pooledHandle(id: string): BackendHandle {
  return { container: poolContainerName(id), pool: id };
}

/** True when the binding names exactly this workspace (same ids under another tenant are another one). */
export function bindsTo(binding: PoolBinding, ref: DockerWorkspaceRef): boolean {
  return (
    binding.tenantId === ref.tenantId &&
    binding.userId === ref.userId &&
    binding.workspaceId === ref.workspaceId
  );
}

/**
 * The host paths of pool machines. Folders are `<dataRoot>/.pool/docker/<id>` (the host-folder drivers'
 * pools share the base dir under `.pool/local/`; each kind lists only its own): a dot-name is never a tenant's
 * folder (safePathSegment encodes a leading dot), and the host-folder drivers' listResources skip
 * dot-names, so nothing that walks `<dataRoot>/<tenant>/...` lists or reaps a pool folder; being under the
 * data root keeps it on the workspaces' file system, so binding is one rename. Runtime dirs are
 * `<runtimeRoot>/.pool/<key>` (no workspace's key starts with a dot).
 */
export class PoolPaths {
  constructor(private readonly config: Pick<TDockerDriverConfig, "dataRoot" | "runtimeRoot">) {}

  get foldersRoot(): string {
    return path.join(this.config.dataRoot, ".pool", "docker");
  }

  get runtimeRoot(): string {
    return path.join(this.config.runtimeRoot, ".pool");
  }

  folder(id: string): string {
    return path.join(this.foldersRoot, ZPoolId.parse(id));
  }

  /** Short enough for the gateway socket inside it (DockerContainers checks runtimeRoot for 49 bytes). */
  runtimeDir(id: string): string {
    const key = ZPoolId.parse(id);
    const short = key.length <= 40 ? key : `h${createHash("sha256").update(key).digest("hex").slice(0, 24)}`;
    return path.join(this.runtimeRoot, short);
  }

  credentialsFile(id: string): string {
    return gatewayCredentialsPath(this.runtimeDir(id));
  }

  bindingFile(id: string): string {
    return `${this.runtimeDir(id)}.binding.json`;
  }

  /** Whether the machine was ever bound (a binding that cannot be read counts: never re-pooled). */
  async isBound(id: string): Promise<boolean> {
    return fs.lstat(this.bindingFile(id)).then(
      () => true,
      () => false,
    );
  }

  /** The machine's binding, or null when it has none or it cannot be read (then it is never listed). */
  async readBinding(id: string): Promise<PoolBinding | null> {
    const raw = await fs.readFile(this.bindingFile(id), "utf8").catch(() => null);
    const parsed = raw === null ? null : ZPoolBinding.safeParse(parseJsonOrNull(raw));
    return parsed?.success ? parsed.data : null;
  }

  /** Written atomically (temporary file + rename), 0600: it is what decides whose data a machine holds. */
  async writeBinding(id: string, binding: PoolBinding): Promise<void> {
    const file = this.bindingFile(id);
    await fs.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
    const temporary = `${file}.${randomBytes(4).toString("hex")}`;
    try {
      await fs.writeFile(temporary, JSON.stringify(binding), { mode: 0o600, flag: "wx" });
      await fs.rename(temporary, file);
    } catch (error) {
      await fs.rm(temporary, { force: true });
      throw new AppError(
        "UNAVAILABLE",
        `Could not record the binding of pool machine ${id}: ${String(error)}`,
        {
          cause: error,
        },
      );
    }
  }

  async removeBinding(id: string): Promise<void> {
    await fs.rm(this.bindingFile(id), { force: true });
  }

  /** The machine's runtime dir, gateway credentials and, last, its binding record. */
  async removeRuntime(id: string): Promise<void> {
    await fs.rm(this.runtimeDir(id), { recursive: true, force: true });
    await fs.rm(this.credentialsFile(id), { force: true });
    await this.removeBinding(id);
  }

  /** The ids of every machine bound to `ref` (purge finds those of a bind whose handle was never stored). */
  async boundTo(ref: DockerWorkspaceRef): Promise<string[]> {
    const entries = await fs.readdir(this.runtimeRoot).catch(() => [] as string[]);
    const ids: string[] = [];
    for (const entry of entries.filter((name) => name.endsWith(".binding.json"))) {
      const raw = await fs.readFile(path.join(this.runtimeRoot, entry), "utf8").catch(() => null);
      const binding = raw === null ? null : ZPoolBinding.safeParse(parseJsonOrNull(raw));
      if (binding?.success && bindsTo(binding.data, ref)) ids.push(binding.data.poolId);
    }
    return ids;
  }
}
