import { createHash } from "node:crypto";
import { PassThrough } from "node:stream";
import type Docker from "dockerode";
import tar from "tar-stream";
import { AppError } from "@/server/shared/errors";
import { GATEWAY_BUNDLE_FILE, type GatewayBundle } from "@/server/workspace/gateway/bundle-gateway";
import { CONTAINER_PATHS, LABELS, type TDockerDriverConfig } from "./docker-config";

/** One line of build output, for the workspace's event stream. */
export type ImageBuildProgress = { phase: "cached" | "building" | "built"; tag: string; message?: string };

/** Bump when the Dockerfile template changes in a way its inputs do not show. */
const TEMPLATE_VERSION = 1;
const MIN_NODE_MAJOR = 18;

/**
 * The workspace image: the configured base image plus what Berth needs inside (the gateway bundle, the
 * workspace user, extra packages). Its tag is a hash of every input, the base image's ID included, so a
 * rebuild happens exactly when something changed; concurrent requests for one tag share one build.
 */
export class WorkspaceImageBuilder {
  private readonly inFlight = new Map<string, Promise<string>>();

  constructor(
    private readonly docker: Docker,
    private readonly config: TDockerDriverConfig,
  ) {}

  async ensure(bundle: GatewayBundle, onProgress?: (progress: ImageBuildProgress) => void): Promise<string> {
    const { tag, inputs, dockerfile } = await this.inputsOf(bundle);
    const existing = this.inFlight.get(tag);
    if (existing) return existing;
    const build = this.buildIfMissing(tag, inputs, dockerfile, bundle, onProgress);
    this.inFlight.set(tag, build);
    try {
      return await build;
    } finally {
      this.inFlight.delete(tag);
    }
  }

  /** The tag new workspaces get with this bundle and config (built or not). */
  async currentTag(bundle: GatewayBundle): Promise<string> {
    return (await this.inputsOf(bundle)).tag;
  }

  /** Tags being built right now: never pruned, even before they exist. */
  building(): string[] {
    return [...this.inFlight.keys()];
  }

  private async inputsOf(bundle: GatewayBundle) {
    const baseId = await this.baseImageId();
    const dockerfile = renderDockerfile(this.config);
    const inputs = createHash("sha256")
      .update(JSON.stringify({ TEMPLATE_VERSION, baseId, dockerfile, gateway: bundle.sha256 }))
      .digest("hex")
      .slice(0, 16);
    return { tag: `${this.config.imageRepository}:${inputs}`, inputs, dockerfile };
  }

  private async baseImageId(): Promise<string> {
    try {
      return (await this.docker.getImage(this.config.baseImage).inspect()).Id;
    } catch (error) {
      if ((error as { statusCode?: number }).statusCode === 404) {
        throw new AppError("UNAVAILABLE", `Docker base image ${this.config.baseImage} is missing`, {
          cause: error,
          userMessage: "The workspace base image is missing: run scripts/docker/build-base-image.sh",
        });
      }
      throw new AppError("UNAVAILABLE", `Docker engine unreachable: ${String(error)}`, { cause: error });
    }
  }

  private async buildIfMissing(
    tag: string,
    inputs: string,
    dockerfile: string,
    bundle: GatewayBundle,
    onProgress?: (progress: ImageBuildProgress) => void,
  ): Promise<string> {
    try {
      await this.docker.getImage(tag).inspect();
      onProgress?.({ phase: "cached", tag });
      return tag;
    } catch (error) {
      if ((error as { statusCode?: number }).statusCode !== 404) throw error;
    }
    onProgress?.({ phase: "building", tag, message: `building ${tag} from ${this.config.baseImage}` });
    const context = tar.pack();
    context.entry({ name: "Dockerfile" }, dockerfile);
    context.entry({ name: GATEWAY_BUNDLE_FILE }, bundle.code);
    context.finalize();
    // tar-stream packs are streamx streams; dockerode wants a Node stream.
    const contextStream = new PassThrough();
    context.pipe(contextStream);
    const networkmode =
      this.config.buildNetworkMode ?? (this.config.extraPackages.length > 0 ? "host" : "none");
    const stream = await this.docker.buildImage(contextStream, {
      t: tag,
      rm: true,
      forcerm: true,
      networkmode,
      labels: { [LABELS.managed]: "true", [LABELS.imageInputs]: inputs },
    });
    const tail: string[] = [];
    await new Promise<void>((resolve, reject) => {
      this.docker.modem.followProgress(
        stream,
        (error: Error | null, events: Array<{ error?: string }>) => {
          const failed = error?.message ?? events.find((event) => event.error)?.error;
          if (failed) {
            reject(
              new AppError("INTERNAL", `docker build of ${tag} failed: ${failed}\n${tail.join("")}`, {
                userMessage: "Building the workspace image failed",
              }),
            );
          } else resolve();
        },
        (event: { stream?: string; status?: string; error?: string }) => {
          const line = event.stream ?? event.status ?? event.error;
          if (!line?.trim()) return;
          tail.push(line.endsWith("\n") ? line : `${line}\n`);
          if (tail.length > 50) tail.shift();
          onProgress?.({ phase: "building", tag, message: line.trimEnd() });
        },
      );
    });
    onProgress?.({ phase: "built", tag });
    return tag;
  }
}

/** The Dockerfile: no network needed unless extra packages are configured. */
function renderDockerfile(config: TDockerDriverConfig): string {
  const { uid, gid } = config;
  const lines = [
    `FROM ${config.baseImage}`,
    "USER 0",
    `COPY ${GATEWAY_BUNDLE_FILE} ${CONTAINER_PATHS.gatewayBundle}`,
    // The gateway needs Node >= 18 and util-linux's setpriv (to start MCP servers as the workspace user).
    [
      "RUN set -e",
      `command -v node >/dev/null || { echo "the base image needs Node.js >= ${MIN_NODE_MAJOR}" >&2; exit 1; }`,
      `node -e 'process.exit(+process.versions.node.split(".")[0] >= ${MIN_NODE_MAJOR} ? 0 : 1)' || { echo "Node.js >= ${MIN_NODE_MAJOR} required" >&2; exit 1; }`,
      `command -v setpriv >/dev/null || { echo "the base image needs setpriv (util-linux)" >&2; exit 1; }`,
      // Appends hold a flock on their target (server/workspace/drivers/exec-scripts/file-scripts.ts).
      `command -v flock >/dev/null || { echo "the base image needs flock (util-linux)" >&2; exit 1; }`,
      `(getent group ${gid} >/dev/null || echo "berth:x:${gid}:" >> /etc/group)`,
      `(getent passwd ${uid} >/dev/null || echo "berth:x:${uid}:${gid}:Berth workspace user:${CONTAINER_PATHS.home}:/bin/sh" >> /etc/passwd)`,
      `mkdir -p ${CONTAINER_PATHS.workdir} ${CONTAINER_PATHS.runtimeDir} ${CONTAINER_PATHS.home}`,
      `chown ${uid}:${gid} ${CONTAINER_PATHS.workdir} ${CONTAINER_PATHS.home}`,
      `chmod 0644 ${CONTAINER_PATHS.gatewayBundle}`,
    ].join(" && \\\n    "),
  ];
  if (config.extraPackages.length > 0) {
    lines.push(
      [
        "RUN apt-get update",
        `DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${config.extraPackages.join(" ")}`,
        "rm -rf /var/lib/apt/lists/*",
      ].join(" && \\\n    "),
    );
  }
  lines.push(`ENV HOME=${CONTAINER_PATHS.home}`, `WORKDIR ${CONTAINER_PATHS.workdir}`, "");
  return lines.join("\n");
}
