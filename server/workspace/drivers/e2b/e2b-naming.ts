import { z } from "zod";
import type { BackendHandle, WorkspaceSpec } from "@/server/workspace/drivers/driver";

/**
 * How a workspace's sandbox is named at E2B. Sandbox ids are assigned by E2B, so the sandbox is found again
 * by the stored handle (its id) or by metadata: `list({ metadata })` is an exact-match AND filter.
 */
export const METADATA = {
  managed: "berth.managed",
  installation: "berth.installation",
  workspace: "berth.workspace",
  tenant: "berth.tenant",
  user: "berth.user",
  agent: "berth.agent",
  /** A warm pool machine (e2b-pool.ts): its pool id, and the key of what it was made with. */
  pool: "berth.pool",
  poolKey: "berth.pool-key",
} as const;

/**
 * Which installation's sandboxes these are: `installation` (BERTH_E2B_INSTALLATION, else the installation
 * id); `acceptLegacy` when it was not configured, so this installation's sandboxes from before installation
 * ids, made under the old default, are still its own when a stored handle names them.
 */
export type SandboxNaming = { installation: string; acceptLegacy: boolean };

/** The metadata value every sandbox had when BERTH_E2B_INSTALLATION was unset, before installation ids. */
const LEGACY_INSTALLATION = "berth";

/** What every sandbox of this installation carries. */
export function installationMetadata(config: SandboxNaming): Record<string, string> {
  return { [METADATA.managed]: "true", [METADATA.installation]: config.installation };
}

/** The filter that finds one workspace's sandbox: the same id under another tenant is another workspace. */
export function workspaceFilter(config: SandboxNaming, spec: WorkspaceSpec): Record<string, string> {
  return {
    ...installationMetadata(config),
    [METADATA.workspace]: spec.workspaceId,
    [METADATA.tenant]: spec.tenantId,
  };
}

export function workspaceMetadata(config: SandboxNaming, spec: WorkspaceSpec): Record<string, string> {
  return { ...workspaceFilter(config, spec), [METADATA.user]: spec.userId, [METADATA.agent]: spec.agentId };
}

/** True when a sandbox's metadata says it is this workspace's (a stored handle is checked against it). */
export function belongsTo(
  metadata: Record<string, string>,
  config: SandboxNaming,
  spec: WorkspaceSpec,
): boolean {
  if (isLegacyOf(metadata, config))
    return belongsTo(metadata, { installation: LEGACY_INSTALLATION, acceptLegacy: false }, spec);
  return Object.entries(workspaceFilter(config, spec)).every(([key, value]) => metadata[key] === value);
}

/** A sandbox this installation made before installation ids (see SandboxNaming.acceptLegacy). */
export function isLegacyOf(metadata: Record<string, string>, config: SandboxNaming): boolean {
  return config.acceptLegacy && metadata[METADATA.installation] === LEGACY_INSTALLATION;
}

/**
 * The stored handle: the reattach key plus what the last provision found, for the integrator to record
 * (`replaced` when the sandbox was gone, `missing` when a resumed sandbox lost workspace state). JSON, no
 * secrets: the gateway token lives in a 0600 file on the host, never here.
 */
export const ZE2bHandle = z.object({
  kind: z.literal("e2b"),
  sandboxId: z.string().min(1),
  template: z.string(),
  workdir: z.string(),
  /** Also written into the sandbox (a root-only marker): a resumed sandbox without it lost its files. */
  markerNonce: z.string().min(1),
  createdAt: z.string(),
  /** This provision resumed a paused sandbox. */
  resumed: z.boolean().default(false),
  /** The sandbox of the previous handle was gone (or not this workspace's) and a new one replaced it. */
  replaced: z
    .object({ previousSandboxId: z.string(), reason: z.enum(["not_found", "foreign"]) })
    .nullable()
    .default(null),
  /** What the resumed sandbox lacked (`marker`, `workdir`): its files did not survive. */
  missing: z.array(z.string()).default([]),
  /**
   * The warm pool machine this workspace was given (e2b-pool.ts): its sandbox carries pool metadata, not
   * the workspace's (E2B metadata cannot change), so every operation follows the handle to it.
   */
  pool: z.string().optional(),
});
export type E2bHandle = z.infer<typeof ZE2bHandle>;

/** The handle stored by an earlier provision, or null (none yet, purged, or not an E2B handle). */
export function parseHandle(handle: BackendHandle | null | undefined): E2bHandle | null {
  if (!handle) return null;
  const parsed = ZE2bHandle.safeParse(handle);
  return parsed.success ? parsed.data : null;
}

/** What every pool machine of this installation carries (no tenant, user or workspace). */
export function poolMetadata(config: SandboxNaming, poolId: string, poolKey: string): Record<string, string> {
  return { ...installationMetadata(config), [METADATA.pool]: poolId, [METADATA.poolKey]: poolKey };
}

/** The pool id of a sandbox this installation made as a pool machine, else null. */
export function poolIdOf(metadata: Record<string, string>, config: SandboxNaming): string | null {
  const ours = Object.entries(installationMetadata(config)).every(([key, value]) => metadata[key] === value);
  return ours ? (metadata[METADATA.pool] ?? null) : null;
}

/** Root-only folder inside every sandbox: the gateway bundle, its pid, log and token file, the marker. */
export const SANDBOX_PATHS = {
  berthDir: "/opt/berth",
  marker: "/opt/berth/workspace.json",
  gatewayPid: "/opt/berth/gateway.pid",
  gatewayLog: "/opt/berth/gateway.log",
} as const;

export const ZMarker = z.object({ workspaceId: z.string(), tenantId: z.string(), nonce: z.string() });
