import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import type { Duplex } from "node:stream";
import type Docker from "dockerode";
import { z } from "zod";
import { AppError, isAppError } from "@/server/shared/errors";
import { GatewayClient, waitForGatewayHealthy } from "@/server/workspace/gateway/client/gateway-client";
import { GatewayConnector } from "@/server/workspace/gateway/client/gateway-connector";
import { GatewayFileClient } from "@/server/workspace/gateway/client/gateway-files";
import { HttpGatewayTransport } from "@/server/workspace/gateway/client/gateway-transport";
import { openGatewayTunnel } from "@/server/workspace/gateway/client/gateway-tunnel";
import {
  GATEWAY_ENV,
  GATEWAY_FILES_PROTOCOL,
  type TGatewayHealth,
} from "@/server/workspace/gateway/gateway-protocol";
import { CONTAINER_PATHS, type TDockerDriverConfig } from "./docker-config";
import { runRootChore } from "./docker-exec";
import { parseJsonOrNull } from "@/server/shared/json";

export type RunningGateway = {
  /** Its requests wait for `ready`, so they can be made at once. */
  client: GatewayClient;
  connector: GatewayConnector;
  /** Host path of the gateway's unix socket (inside the workspace's runtime dir). */
  socketPath: string;
  instanceNonce: string;
  /**
   * Resolves with the health answer once the gateway answers with `instanceNonce` (its `protocol` says
   * which endpoints it serves); rejects UNAVAILABLE, with the log's tail, when it does not start.
   */
  ready: Promise<TGatewayHealth>;
  /**
   * Its file endpoints. They wait for `ready` too, and refuse with a fall-back error (the backend then uses
   * exec) when the gateway did not start or is older than protocol 2.
   */
  files: GatewayFileClient;
  /** A preview tunnel to a port inside the container (the gateway's tunnel upgrade, protocol ≥ 4). */
  openTunnel: (port: number) => Promise<Duplex>;
};

/**
 * Hands a freshly created workdir to the workspace user ($1 = uid:gid; not recursive: existing files keep
 * their owners). Its own exec, run beside the launch: the first command waits for it, not for the gateway.
 */
const CHOWN_WORKDIR = `chown "$1" ${CONTAINER_PATHS.workdir}`;

/**
 * The launch, one detached root exec:
 * - stop an earlier gateway (SIGTERM so it closes its MCP servers, SIGKILL after 3 s);
 * - truncate the log so it only holds the current instance's output;
 * - record the pid and become the gateway; its output goes to a log the host can read on failure.
 */
const LAUNCH = [
  `p=$(cat ${CONTAINER_PATHS.gatewayPidFile} 2>/dev/null)`,
  // The pid file survives container restarts on the bind mount: only signal it if it IS a gateway, and not
  // this very shell (a restarted container hands out the same pids, and this script names the bundle too).
  'if [ -n "$p" ] && [ "$p" != "$$" ] && grep -q berth-gateway "/proc/$p/cmdline" 2>/dev/null && kill -TERM "$p" 2>/dev/null; then',
  '  i=0; while kill -0 "$p" 2>/dev/null && [ $i -lt 150 ]; do sleep 0.02; i=$((i+1)); done',
  '  kill -KILL "$p" 2>/dev/null',
  "fi",
  `: > ${CONTAINER_PATHS.gatewayLog}`,
  `echo $$ > ${CONTAINER_PATHS.gatewayPidFile}`,
  `exec node ${CONTAINER_PATHS.gatewayBundle} >> ${CONTAINER_PATHS.gatewayLog} 2>&1`,
].join("\n");

/** The health check's poll interval grows to this: a refused unix socket costs microseconds to ask. */
const HEALTH_POLL_MAX_MS = 25;

/**
 * (Re)starts the MCP gateway inside a running workspace container, with a FRESH bearer token and instance
 * nonce. Resolves once the workdir belongs to the workspace user (commands can run); the gateway's health
 * is awaited in the background (`ready`), so the first command does not wait for Node to boot in the
 * container: MCP and file requests wait for it instead.
 *
 * The gateway runs as root so agent commands (uid 1000) cannot read its token from /proc/<pid>/environ;
 * it starts stdio MCP servers as the workspace user. The token travels in the exec's environment,
 * never in argv (which `ps` shows to everyone).
 */
export async function startDockerGateway(
  container: Docker.Container,
  config: TDockerDriverConfig,
  runtime: {
    hostRuntimeDir: string;
    hostWorkdir: string;
    containerStartedAt?: number;
    /** True when a chown on the host gives the container's user the workdir (root host, no user namespace). */
    hostSetsOwners?: () => Promise<boolean>;
  },
  options: { reuseToken?: boolean; onReady?: () => void } = {},
): Promise<RunningGateway> {
  const { hostRuntimeDir } = runtime;
  const socketPath = path.join(hostRuntimeDir, path.basename(CONTAINER_PATHS.gatewaySocket));
  if (options.reuseToken) {
    const running = await attachRunningGateway(config, runtime, socketPath);
    if (running) return running;
  }
  const token = randomBytes(32).toString("base64url");
  const instanceNonce = randomBytes(16).toString("hex");
  const hostLog = path.join(hostRuntimeDir, path.basename(CONTAINER_PATHS.gatewayLog));
  // Written before the launch so a concurrent attacher never sees a healthy gateway without its token.
  await writeCredentials(hostRuntimeDir, { token, instanceNonce, launchedAt: Date.now() });

  const started = launchGateway(container, config, { token, instanceNonce });
  // The first command needs the workdir to be the workspace user's: chown it unless it already is.
  const workdirReady = (await ownedBy(runtime.hostWorkdir, config))
    ? Promise.resolve()
    : (await runtime.hostSetsOwners?.())
      ? fs.chown(runtime.hostWorkdir, config.uid, config.gid)
      : chownWorkdir(container, config);
  const probe = new GatewayClient(new HttpGatewayTransport({ socketPath }, token));
  const ready = started
    .then(() =>
      waitForGatewayHealthy(probe, instanceNonce, {
        timeoutMs: config.gateway.startTimeoutMs,
        maxPollDelayMs: HEALTH_POLL_MAX_MS,
        diagnostics: () => tailOf(hostLog),
      }),
    )
    .then(
      (health) => {
        options.onReady?.();
        return health;
      },
      (error: unknown) => {
        throw isAppError(error)
          ? new AppError(error.code, `${error.message} (container ${container.id.slice(0, 12)})`, {
              cause: error,
              userMessage: error.userMessage,
              details: error.details ? { ...error.details } : undefined,
            })
          : error;
      },
    );
  // Observed by every request through the gateway; unobserved it must not crash the process.
  ready.catch(() => undefined);
  await workdirReady;
  return runningGateway(config, { socketPath, token, instanceNonce, ready });
}

/** Starts the gateway in a detached exec; resolves once Docker started it. */
async function launchGateway(
  container: Docker.Container,
  config: TDockerDriverConfig,
  credentials: { token: string; instanceNonce: string },
): Promise<void> {
  const exec = await container.exec({
    Cmd: ["/bin/sh", "-c", LAUNCH],
    User: "0:0",
    WorkingDir: CONTAINER_PATHS.workdir,
    AttachStdout: false,
    AttachStderr: false,
    Env: [
      `${GATEWAY_ENV.listen}=unix:${CONTAINER_PATHS.gatewaySocket}`,
      `${GATEWAY_ENV.token}=${credentials.token}`,
      `${GATEWAY_ENV.nonce}=${credentials.instanceNonce}`,
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
}

async function chownWorkdir(container: Docker.Container, config: TDockerDriverConfig): Promise<void> {
  const result = await runRootChore(container, [
    "/bin/sh",
    "-c",
    CHOWN_WORKDIR,
    "chown",
    `${config.uid}:${config.gid}`,
  ]);
  if (result.exitCode !== 0) {
    throw new AppError("INTERNAL", `Could not prepare the workspace container: ${result.stderr.trim()}`);
  }
}

/** True when the host sees the workdir owned by the workspace user already (no chown to wait for). */
async function ownedBy(hostWorkdir: string, config: TDockerDriverConfig): Promise<boolean> {
  const stat = await fs.stat(hostWorkdir).catch(() => null);
  return stat !== null && stat.uid === config.uid && stat.gid === config.gid;
}

function runningGateway(
  config: TDockerDriverConfig,
  gateway: { socketPath: string; token: string; instanceNonce: string; ready: Promise<TGatewayHealth> },
): RunningGateway {
  const { socketPath, token, instanceNonce, ready } = gateway;
  const servesFiles = ready.then((health) => health.protocol >= GATEWAY_FILES_PROTOCOL);
  servesFiles.catch(() => undefined); // observed by the file operations, if any
  // Tool calls go over the channel: the socket is bind-mounted, nothing stands between host and gateway.
  const transport = new HttpGatewayTransport({ socketPath }, token, { channel: true });
  const client = new GatewayClient(transport, { ready });
  return {
    client,
    connector: new GatewayConnector(client, { defaultCallTimeoutMs: config.gateway.callTimeoutMs }),
    socketPath,
    instanceNonce,
    ready,
    files: new GatewayFileClient({ socketPath }, token, { ready: servesFiles }),
    openTunnel: (port) => openGatewayTunnel({ socketPath }, token, port, { health: ready }),
  };
}

const ZGatewayCredentials = z.object({
  token: z.string().min(1),
  instanceNonce: z.string().min(1),
  /** Epoch ms of the launch: a gateway launched moments ago may still be booting. */
  launchedAt: z.number().optional(),
});

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

/**
 * The healthy gateway another process (or an earlier open) started in the runtime dir, with the credentials
 * on file: no Docker call at all (one file read, one health request over the socket). Null when there is
 * none answering; the caller then inspects the container and starts one.
 */
export function reattachDockerGateway(
  config: TDockerDriverConfig,
  hostRuntimeDir: string,
): Promise<RunningGateway | null> {
  const socketPath = path.join(hostRuntimeDir, path.basename(CONTAINER_PATHS.gatewaySocket));
  return attachRunningGateway(config, { hostRuntimeDir }, socketPath);
}

/**
 * The gateway already running with the credentials on file, or null when there is none (or it is dead).
 * One launched in the container's current run less than the start timeout ago may still be booting (its
 * launcher does not wait for it): it is waited for rather than restarted under the launcher.
 */
async function attachRunningGateway(
  config: TDockerDriverConfig,
  runtime: { hostRuntimeDir: string; containerStartedAt?: number },
  socketPath: string,
): Promise<RunningGateway | null> {
  const raw = await fs.readFile(gatewayCredentialsPath(runtime.hostRuntimeDir), "utf8").catch(() => null);
  const parsed = raw === null ? null : ZGatewayCredentials.safeParse(parseJsonOrNull(raw));
  if (!parsed?.success) return null;
  const { token, instanceNonce, launchedAt } = parsed.data;
  const client = new GatewayClient(new HttpGatewayTransport({ socketPath }, token));
  const age = launchedAt === undefined ? Number.POSITIVE_INFINITY : Date.now() - launchedAt;
  const mayBeBooting =
    age < config.gateway.startTimeoutMs &&
    launchedAt !== undefined &&
    launchedAt >= (runtime.containerStartedAt ?? Number.POSITIVE_INFINITY);
  const health = mayBeBooting
    ? await waitForGatewayHealthy(client, instanceNonce, {
        timeoutMs: config.gateway.startTimeoutMs - age,
        maxPollDelayMs: HEALTH_POLL_MAX_MS,
      }).catch(() => null)
    : await client.healthOf(instanceNonce, 2_000);
  if (!health) return null;
  return runningGateway(config, { socketPath, token, instanceNonce, ready: Promise.resolve(health) });
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
