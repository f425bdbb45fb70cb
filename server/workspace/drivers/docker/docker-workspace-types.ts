import type Docker from "dockerode";
import type { InstallationIdSource } from "@/server/workspace/drivers/installation";
import type { WorkspaceResources } from "@/server/workspace/drivers/driver";
import type { McpConnector } from "@/server/workspace/mcp/types";
import type { DockerWorkspaceRef, TDockerDriverConfig } from "./docker-config";
import type { RunningGateway } from "./docker-gateway";
import type { DockerMachine } from "./docker-machine";
import type { ImageBuildProgress } from "./workspace-image";

/**
 * The shapes DockerContainers (docker-containers.ts) and the warm pool (docker-warm-pool.ts,
 * docker-pool-bound.ts) share: the pool works through `DockerMachineHost`, which DockerContainers
 * implements, so neither file imports the other.
 */

/** Provisioning progress, for the workspace's event stream. */
export type DockerCreateEvent =
  | ({ type: "image" } & ImageBuildProgress)
  | { type: "container"; state: "created" | "reattached"; name: string }
  | { type: "gateway"; state: "starting" | "ready" };

export type DockerWorkspaceRequest = DockerWorkspaceRef & {
  /** The agent whose request created the workspace ("" when none); a label only. */
  agentId: string;
  /** Host directory bound at /workspace. Default `<dataRoot>/<tenant>/<user>/<workspace id>`. */
  hostWorkdir?: string;
  onProgress?: (event: DockerCreateEvent) => void;
  /**
   * Reuse a healthy gateway started by another process (credentials on file) instead of restarting it with
   * a new token, which would cut off every other process attached to it. Default false: always rotate.
   */
  reuseToken?: boolean;
  /** The tenant's per-workspace quotas (CPUs, memory): the container gets the smaller of these and the config. */
  resources?: WorkspaceResources;
  /**
   * The workspace was provisioned before (the engine attaches with its stored handle): a missing host folder,
   * or a container made for another one, means its files vanished (`workspaceVanished`), never a new empty
   * folder; the workers provision it again and record the loss. Default false: create what is missing.
   */
  provisionedBefore?: boolean;
  /**
   * The warm pool machine the stored handle names (docker-warm-pool.ts): its container is used when its
   * binding record names this workspace and it is still there; otherwise the workspace's own container.
   */
  pool?: string;
};

/**
 * A running workspace container whose workdir is the workspace user's: commands can run. Its gateway may
 * still be starting (`gateway.ready`); MCP and file requests through it wait for it.
 */
export type DockerWorkspaceHandle = {
  ref: DockerWorkspaceRef;
  containerName: string;
  /** The warm pool machine this workspace was given (its container is `berth-pool-<id>`), if any. */
  pool?: string;
  backend: DockerMachine;
  /** Connects MCP declarations through the in-container gateway (same port as the local connector). */
  mcpConnector: McpConnector;
  gateway: RunningGateway;
  hostWorkdir: string;
  /** False when open() had to create the container; true when it found an existing one. */
  reattached: boolean;
  isAlive(): Promise<boolean>;
  /** Stops the container; the data stays for a later open(). Same as `backend.close()`. */
  close(): Promise<void>;
};

/** A running container and its gateway, placed for a workspace (its own or a bound pool machine). */
export type PlacedMachine = {
  ref: DockerWorkspaceRef;
  name: string;
  container: Docker.Container;
  gateway: RunningGateway;
  hostWorkdir: string;
  workdirIdentity: string;
  hostRuntimeDir: string;
  reattached: boolean;
  pool?: string;
};

/** What the warm pool uses of DockerContainers. */
export interface DockerMachineHost {
  readonly config: TDockerDriverConfig;
  readonly docker: Docker;
  readonly installationId: InstallationIdSource;
  readonly hostSetsOwners: () => Promise<boolean>;
  hostWorkdirOf(ref: DockerWorkspaceRef): string;
  imageTagNow(): Promise<string>;
  ensureImage(onProgress?: (event: DockerCreateEvent) => void): Promise<string>;
  machineHandle(placed: PlacedMachine): DockerWorkspaceHandle;
  removeMachine(machine: { name: string; hostWorkdir: string; hostRuntimeDir: string }): Promise<void>;
}
