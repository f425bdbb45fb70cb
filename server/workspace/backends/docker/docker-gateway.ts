import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import type Docker from "dockerode";
import { z } from "zod";
import { AppError, isAppError } from "@/server/shared/errors";
import { GatewayClient, waitForGatewayHealthy } from "@/server/workspace/gateway/client/gateway-client";
import { GatewayConnector } from "@/server/workspace/gateway/client/gateway-connector";
import { GatewayFileClient } from "@/server/workspace/gateway/client/gateway-files";
import { HttpGatewayTransport } from "@/server/workspace/gateway/client/gateway-transport";
import { GATEWAY_ENV, GATEWAY_FILES_PROTOCOL } from "@/server/workspace/gateway/gateway-protocol";
import { CONTAINER_PATHS, type TDockerProviderConfig } from "./docker-config";
import { runRootChore } from "./docker-exec";

export type RunningGateway = {
  client: GatewayClient;
  connector: GatewayConnector;
  /** Host path of the gateway's unix socket (inside the workspace's runtime dir). */
  socketPath: string;
  instanceNonce: string;
  /** The protocol the gateway reported in its health answer. */
  protocol: number;
  /** Its file endpoints, or null when it is older than protocol 2 (file operations then stay on exec). */
  files: GatewayFileClient | null;
};

/**
 * One root chore before every launch (each exec costs a runc round trip, so they are batched):
 * - hand a freshly created workdir to the workspace user ($1 = uid:gid; not recursive: existing files keep
 *   their owners);
 * - stop an earlier gateway (SIGTERM so it closes its MCP servers, SIGKILL after 3 s);
 * - truncate the log so it only holds the current instance's output.
 */
const PREPARE = [
  `chown "$1" ${CONTAINER_PATHS.workdir} || exit 1`,
  `p=$(cat ${CONTAINER_PATHS.gatewayPidFile} 2>/dev/null)`,
  // The pid file survives container restarts on the bind mount: only signal it if it IS a gateway.
  'if [ -n "$p" ] && grep -q berth-gateway "/proc/$p/cmdline" 2>/dev/null && kill -TERM "$p" 2>/dev/null; then',
  '  i=0; while kill -0 "$p" 2>/dev/null && [ $i -lt 150 ]; do sleep 0.02; i=$((i+1)); done',
  '  kill -KILL "$p" 2>/dev/null',
  "fi",
  `: > ${CONTAINER_PATHS.gatewayLog}`,
  "exit 0",
].join("\n");

/** Records the pid, then becomes the gateway; output goes to a log the host can read on failure. */
const LAUNCH = `echo $$ > ${CONTAINER_PATHS.gatewayPidFile}; exec node ${CONTAINER_PATHS.gatewayBundle} >> ${CONTAINER_PATHS.gatewayLog} 2>&1`;

/**
 * (Re)starts the MCP gateway inside a running workspace container, with a FRESH bearer token and instance
 * nonce, and resolves only once it answers /health with that nonce over the bind-mounted unix socket.
 *
 * The gateway runs as root so agent commands (uid 1000) cannot read its token from /proc/<pid>/environ;
 * it starts stdio MCP servers as the workspace user. The token travels in the exec's environment,
 * never in argv (which `ps` shows to everyone).
 */
export async function startDockerGateway(
  container: Docker.Container,
  config: TDockerProviderConfig,
  hostRuntimeDir: string,
  options: { reuseToken?: boolean } = {},
): Promise<RunningGateway> {
  const socketPath = path.join(hostRuntimeDir, path.basename(CONTAINER_PATHS.gatewaySocket));
  if (options.reuseToken) {
    const running = await attachRunningGateway(config, hostRuntimeDir, socketPath);
    if (running) return running;
  }
  const token = randomBytes(32).toString("base64url");
  const instanceNonce = randomBytes(16).toString("hex");
  const hostLog = path.join(hostRuntimeDir, path.basename(CONTAINER_PATHS.gatewayLog));

  const prepared = await runRootChore(container, [
    "/bin/sh",
    "-c",
    PREPARE,
    "prepare",
    `${config.uid}:${config.gid}`,
  ]);
  if (prepared.exitCode !== 0) {
    throw new AppError("INTERNAL", `Could not prepare the workspace container: ${prepared.stderr.trim()}`);
  }
  const exec = await container.exec({
    Cmd: ["/bin/sh", "-c", LAUNCH],
    User: "0:0",
    WorkingDir: CONTAINER_PATHS.workdir,
    AttachStdout: false,
    AttachStderr: false,
    Env: [
      `${GATEWAY_ENV.listen}=unix:${CONTAINER_PATHS.gatewaySocket}`,
      `${GATEWAY_ENV.token}=${token}`,
      `${GATEWAY_ENV.nonce}=${instanceNonce}`,
      `${GATEWAY_ENV.defaultCallTimeoutMs}=${config.gateway.callTimeoutMs}`,
      `${GATEWAY_ENV.mcpUser}=${config.uid}:${config.gid}`,
      `${GATEWAY_ENV.mcpHome}=${CONTAINER_PATHS.home}`,
      `${GATEWAY_ENV.workdir}=${CONTAINER_PATHS.workdir}`,
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    ],
  });
  // Detached, the answer carries nothing, but docker-modem hands it back as an open stream: left unread,
  // its connection to the daemon stayed open (and kept the process alive) for minutes per gateway launch.
  const launched: { destroy?: () => void } | undefined = await exec.start({ Detach: true });
  launched?.destroy?.();
  // Written before the health wait so a concurrent attacher never sees a healthy gateway without its token.
  await writeCredentials(hostRuntimeDir, { token, instanceNonce });

  const client = new GatewayClient(new HttpGatewayTransport({ socketPath }, token));
  const health = await waitForGatewayHealthy(client, instanceNonce, {
    timeoutMs: config.gateway.startTimeoutMs,
    diagnostics: () => tailOf(hostLog),
  }).catch((error: unknown) => {
    throw isAppError(error)
      ? new AppError(error.code, `${error.message} (container ${container.id.slice(0, 12)})`, {
          cause: error,
          userMessage: error.userMessage,
          details: error.details ? { ...error.details } : undefined,
        })
      : error;
  });
  return runningGateway(client, config, { socketPath, token, instanceNonce, protocol: health.protocol });
}

function runningGateway(
  client: GatewayClient,
  config: TDockerProviderConfig,
  gateway: { socketPath: string; token: string; instanceNonce: string; protocol: number },
): RunningGateway {
  const { socketPath, token, instanceNonce, protocol } = gateway;
  return {
    client,
    connector: new GatewayConnector(client, { defaultCallTimeoutMs: config.gateway.callTimeoutMs }),
    socketPath,
    instanceNonce,
    protocol,
    files: protocol >= GATEWAY_FILES_PROTOCOL ? new GatewayFileClient({ socketPath }, token) : null,
  };
}

const ZGatewayCredentials = z.object({ token: z.string().min(1), instanceNonce: z.string().min(1) });

/**
 * Where the running gateway's token lives so OTHER host processes (API replicas attaching after a worker
 * provisioned) can use it instead of restarting the gateway under everyone else: a 0600 file NEXT TO the
 * runtime dir, never inside it (the runtime dir is mounted into the container; this file is not).
 */
export function gatewayCredentialsPath(hostRuntimeDir: string): string {
  return `${hostRuntimeDir}.gateway.json`;
}

async function writeCredentials(hostRuntimeDir: string, credentials: z.infer<typeof ZGatewayCredentials>) {
  const file = gatewayCredentialsPath(hostRuntimeDir);
  const temporary = `${file}.${randomBytes(4).toString("hex")}`;
  await fs.writeFile(temporary, JSON.stringify(credentials), { mode: 0o600, flag: "wx" });
  await fs.rename(temporary, file);
}

/** The gateway already running with the credentials on file, or null when there is none (or it is dead). */
async function attachRunningGateway(
  config: TDockerProviderConfig,
  hostRuntimeDir: string,
  socketPath: string,
): Promise<RunningGateway | null> {
  const raw = await fs.readFile(gatewayCredentialsPath(hostRuntimeDir), "utf8").catch(() => null);
  const parsed = raw === null ? null : ZGatewayCredentials.safeParse(safeJson(raw));
  if (!parsed?.success) return null;
  const { token, instanceNonce } = parsed.data;
  const client = new GatewayClient(new HttpGatewayTransport({ socketPath }, token));
  const health = await client.healthOf(instanceNonce, 2_000);
  if (!health) return null;
  return runningGateway(client, config, { socketPath, token, instanceNonce, protocol: health.protocol });
}

function safeJson(raw: string): unknown {
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    return null;
  }
}

async function tailOf(file: string, bytes = 4000): Promise<string> {
  const handle = await fs.open(file, "r");
  try {
    const { size } = await handle.stat();
    const start = Math.max(0, size - bytes);
    const buffer = Buffer.alloc(size - start);
    await handle.read(buffer, 0, buffer.length, start);
    return buffer.toString("utf8");
  } finally {
    await handle.close();
  }
}
