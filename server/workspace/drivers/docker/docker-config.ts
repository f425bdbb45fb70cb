import { createHash } from "node:crypto";
import os from "node:os";
import path from "node:path";
import { z } from "zod";

/**
 * Configuration of the Docker driver. Parsed once at the composition root (which reads the
 * environment); everything below receives the parsed object.
 */
export const ZDockerDriverConfig = z.object({
  /** Docker engine socket. */
  socketPath: z.string().default("/var/run/docker.sock"),
  /** Image the workspace image is built FROM; built from Debian by scripts/docker/build-base-image.sh. */
  baseImage: z.string().min(1).default("berth-base:bookworm"),
  /** Repository of the derived workspace images; the tag is a hash of the build inputs. */
  imageRepository: z
    .string()
    .regex(/^[a-z0-9][a-z0-9._/-]*$/)
    .default("berth-workspace"),
  /** Extra Debian packages installed into the workspace image (needs apt reachable from the build). */
  extraPackages: z
    .array(z.string().regex(/^[a-z0-9][a-z0-9+.:=~-]*$/, "not a Debian package name"))
    .default([]),
  /**
   * Network of the build's RUN steps. Default: "none" without extra packages (nothing to download),
   * "host" with them (the engine may run without a bridge, so "default" would not exist).
   */
  buildNetworkMode: z.string().optional(),
  /** Network of workspace containers. "none" (default) cuts all egress; users may allow e.g. "host". */
  networkMode: z.string().default("none"),
  /** CPU limit in cores (fractions allowed). */
  cpus: z.number().positive().default(1),
  /** Memory limit in bytes; swap is disabled so the limit is real. */
  memoryBytes: z
    .number()
    .int()
    .min(16 * 1024 * 1024)
    .default(1024 * 1024 * 1024),
  /** Maximum number of processes/threads in the container (contains fork bombs). */
  pidsLimit: z.number().int().min(16).default(512),
  /** The non-root user agent commands run as (created in the image if the base lacks it). */
  uid: z.number().int().min(1).default(1000),
  gid: z.number().int().min(1).default(1000),
  /** Extra environment of every command in the container. */
  env: z.record(z.string(), z.string()).default({}),
  /** Host directory holding one workdir per workspace (`<dataRoot>/<workspaceId>`), bind-mounted at /workspace. */
  dataRoot: z.string().refine((value) => path.isAbsolute(value), "dataRoot must be absolute"),
  /**
   * Host directory holding one small runtime directory per workspace (gateway socket, pid file, log),
   * bind-mounted read-only-for-the-agent at /run/berth. Kept OUT of the workdir so an agent cannot
   * replace the socket with its own listener. Unix socket paths are limited to 107 bytes: keep it short.
   */
  runtimeRoot: z
    .string()
    .refine((value) => path.isAbsolute(value), "runtimeRoot must be absolute")
    .default(path.join(os.tmpdir(), "berth-run")),
  gateway: z
    .object({
      /** Per-call default when neither the call nor the MCP declaration sets a timeout. */
      callTimeoutMs: z.number().int().positive().default(30_000),
      /** Bound on the gateway answering its first health check. */
      startTimeoutMs: z.number().int().positive().default(30_000),
    })
    .prefault({}),
  /**
   * A prebuilt gateway bundle (`npm run build:gateway`). Unset: bundled from the TypeScript sources on first
   * use. Set it where the sources are not next to the running code (e.g. inside a Next.js server bundle).
   */
  gatewayBundlePath: z.string().optional(),
  /** Bound on stopping a container (SIGTERM, then SIGKILL). */
  stopTimeoutSeconds: z.number().int().min(0).default(5),
  /**
   * Workspace images no container uses and new workspaces no longer get (Berth or its config changed) are
   * removed by `workspace.reconcile` once they are this old: younger ones may be about to get a container.
   */
  imageGcMinAgeMs: z
    .number()
    .int()
    .min(0)
    .default(60 * 60_000),
});

export type TDockerDriverConfig = z.infer<typeof ZDockerDriverConfig>;
export type TDockerDriverConfigInput = z.input<typeof ZDockerDriverConfig>;

/** Paths inside every workspace container. */
export const CONTAINER_PATHS = {
  workdir: "/workspace",
  runtimeDir: "/run/berth",
  gatewaySocket: "/run/berth/gateway.sock",
  gatewayPidFile: "/run/berth/gateway.pid",
  gatewayLog: "/run/berth/gateway.log",
  gatewayBundle: "/opt/berth/berth-gateway.cjs",
  home: "/home/berth",
} as const;

export const LABELS = {
  managed: "dev.berth.managed",
  /** The installation that created the container (server/workspace/drivers/installation.ts). */
  installation: "dev.berth.installation",
  workspace: "dev.berth.workspace",
  tenant: "dev.berth.tenant",
  user: "dev.berth.user",
  agent: "dev.berth.agent",
  configHash: "dev.berth.config-hash",
  /** `<dev>:<inode>` of the host folder the container was created on (host-folder.ts). */
  workdir: "dev.berth.workdir",
  imageInputs: "dev.berth.image-inputs",
  /** A warm pool machine's id (docker-warm-pool.ts): such a container carries no workspace labels. */
  pool: "dev.berth.pool",
  /** The warm pool key the pool machine was made under (what it has baked in). */
  poolKey: "dev.berth.pool-key",
} as const;

/** A workspace's identity: the same workspace id under another tenant or user is another workspace. */
export type DockerWorkspaceRef = { tenantId: string; userId: string; workspaceId: string };

const PLAIN_ID = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,39}$/;

/**
 * The deterministic key of a workspace's container and runtime dir: the workspace id itself when it is a
 * plain id (hashed otherwise), plus 8 hex of (tenant, user) so equal ids of different owners never share
 * a container. Stable across restarts, which is what makes reattaching work.
 */
export function containerKey(ref: DockerWorkspaceRef): string {
  const idPart = PLAIN_ID.test(ref.workspaceId)
    ? ref.workspaceId
    : `h${sha256Hex(ref.workspaceId).slice(0, 24)}`;
  return `${idPart}-${sha256Hex(`${ref.tenantId}\0${ref.userId}`).slice(0, 8)}`;
}

/** `berth-ws-<workspace id>-<owner hash>`. */
export function containerName(ref: DockerWorkspaceRef): string {
  return `berth-ws-${containerKey(ref)}`;
}

function sha256Hex(value: string): string {
  return createHash("sha256").update(value, "utf8").digest("hex");
}
