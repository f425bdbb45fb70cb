import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import type { Sandbox } from "e2b";
import { z } from "zod";
import { AppError } from "@/server/shared/errors";
import { loadGatewayBundle } from "@/server/workspace/gateway/bundle-gateway";
import { GatewayClient, waitForGatewayHealthy } from "@/server/workspace/gateway/client/gateway-client";
import { GatewayConnector } from "@/server/workspace/gateway/client/gateway-connector";
import { GATEWAY_ENV } from "@/server/workspace/gateway/gateway-protocol";
import { runChore, scriptLine } from "./e2b-commands";
import type { E2bDriverConfig } from "./e2b-config";
import { toAppError } from "./e2b-errors";
import { E2bGatewayTransport, portEndpoint } from "./e2b-gateway-transport";
import { SANDBOX_PATHS } from "./e2b-naming";
import type { SandboxFacts } from "./e2b-prepare";

export type RunningGateway = {
  client: GatewayClient;
  connector: GatewayConnector;
  transport: E2bGatewayTransport;
  instanceNonce: string;
};

/** The gateway bundle's path inside the sandbox: named by its hash, so a new Berth uploads a new one. */
export async function gatewayBundle(config: E2bDriverConfig): Promise<{ code: string; sandboxPath: string }> {
  const bundle = await loadGatewayBundle(config.gatewayBundlePath);
  return {
    code: bundle.code,
    sandboxPath: `${SANDBOX_PATHS.berthDir}/berth-gateway-${bundle.sha256.slice(0, 16)}.cjs`,
  };
}

const ZCredentials = z.object({
  token: z.string().min(16),
  instanceNonce: z.string().min(1),
  port: z.number().int(),
});
type Credentials = z.infer<typeof ZCredentials>;

/**
 * The gateway's credentials stay on the host: a 0600 file per sandbox in the driver's runtime dir, shared
 * by the processes that attach to it (API replicas, workers), never in the stored handle.
 */
function credentialsPath(runtimeDir: string, sandboxId: string): string {
  return path.join(runtimeDir, `${sandboxId}.gateway.json`);
}

async function readCredentials(file: string): Promise<Credentials | null> {
  const raw = await fs.readFile(file, "utf8").catch(() => null);
  if (raw === null) return null;
  try {
    const parsed = ZCredentials.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

async function writeCredentials(file: string, credentials: Credentials): Promise<void> {
  await fs.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const temporary = `${file}.${randomBytes(4).toString("hex")}`;
  await fs.writeFile(temporary, JSON.stringify(credentials), { mode: 0o600, flag: "wx" });
  await fs.rename(temporary, file);
}

/** Stops an earlier gateway (SIGTERM so it closes its MCP servers, SIGKILL after 3 s), truncates the log. */
const STOP_PREVIOUS = [
  `p=$(cat ${SANDBOX_PATHS.gatewayPid} 2>/dev/null)`,
  'if [ -n "$p" ] && grep -q berth-gateway "/proc/$p/cmdline" 2>/dev/null && kill -TERM "$p" 2>/dev/null; then',
  '  i=0; while kill -0 "$p" 2>/dev/null && [ $i -lt 150 ]; do sleep 0.02; i=$((i+1)); done',
  '  kill -KILL "$p" 2>/dev/null',
  "fi",
  `: > ${SANDBOX_PATHS.gatewayLog}`,
].join("\n");
/** $1 node, $2 bundle: records the pid, then becomes the gateway. */
const LAUNCH = `echo $$ > ${SANDBOX_PATHS.gatewayPid}; exec "$1" "$2" >> ${SANDBOX_PATHS.gatewayLog} 2>&1`;

export type GatewayContext = { config: E2bDriverConfig; runtimeDir: string };

function connect(sandbox: Sandbox, config: E2bDriverConfig, credentials: Credentials): RunningGateway {
  const transport = new E2bGatewayTransport(
    portEndpoint(sandbox, credentials.port, config.sandboxUrl),
    credentials.token,
  );
  const client = new GatewayClient(transport);
  return {
    client,
    transport,
    instanceNonce: credentials.instanceNonce,
    connector: new GatewayConnector(client, { defaultCallTimeoutMs: config.gateway.callTimeoutMs }),
  };
}

/**
 * The sandbox's gateway, reused when the credentials on file answer /health with their nonce (a worker
 * started it; a paused sandbox resumed with its memory), else (re)started with a FRESH token and nonce:
 * as root, on 127.0.0.1 only, the token handed over in a root-only file the gateway deletes after reading
 * it (never argv, never the envd process list), MCP servers and file work as the workspace user.
 */
export async function ensureGateway(
  sandbox: Sandbox,
  context: GatewayContext,
  facts: () => Promise<SandboxFacts>,
): Promise<{ gateway: RunningGateway; started: boolean }> {
  const { config } = context;
  const file = credentialsPath(context.runtimeDir, sandbox.sandboxId);
  const running = await reuseRunning(sandbox, config, file);
  if (running) return { gateway: running, started: false };
  // One start at a time among the processes sharing the runtime dir; the others wait and reuse it.
  return withStartLock(`${file}.lock`, config.gateway.startTimeoutMs + 30_000, async () => {
    const started = await reuseRunning(sandbox, config, file);
    if (started) return { gateway: started, started: false };
    return { gateway: await startGateway(sandbox, config, file, await facts()), started: true };
  });
}

async function reuseRunning(
  sandbox: Sandbox,
  config: E2bDriverConfig,
  file: string,
): Promise<RunningGateway | null> {
  const existing = await readCredentials(file);
  if (!existing || existing.port !== config.gateway.port) return null;
  const gateway = connect(sandbox, config, existing);
  if (await gateway.client.isHealthy(existing.instanceNonce, 5_000)) return gateway;
  gateway.transport.close();
  return null;
}

/**
 * Runs `action` holding an exclusive lock file (O_EXCL). A holder that died leaves the file behind; one
 * older than `staleMs` is taken over. Waiters poll (the holder is starting a gateway: seconds).
 */
async function withStartLock<T>(lock: string, staleMs: number, action: () => Promise<T>): Promise<T> {
  await fs.mkdir(path.dirname(lock), { recursive: true, mode: 0o700 });
  const deadline = Date.now() + staleMs;
  let delay = 50;
  for (;;) {
    try {
      const handle = await fs.open(lock, "wx", 0o600);
      await handle.close();
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      const stats = await fs.stat(lock).catch(() => null);
      if (stats && (Date.now() - stats.mtimeMs > staleMs || Date.now() > deadline)) {
        await fs.rm(lock, { force: true });
        continue;
      }
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, 500);
    }
  }
  try {
    return await action();
  } finally {
    await fs.rm(lock, { force: true });
  }
}

async function startGateway(
  sandbox: Sandbox,
  config: E2bDriverConfig,
  file: string,
  known: SandboxFacts,
): Promise<RunningGateway> {
  const bundle = await gatewayBundle(config);
  const chore = { user: "root", timeoutMs: 30_000, requestTimeoutMs: config.requestTimeoutMs };
  const credentials: Credentials = {
    token: randomBytes(32).toString("base64url"),
    instanceNonce: randomBytes(16).toString("hex"),
    port: config.gateway.port,
  };
  try {
    if (!known.bundlePresent) {
      // envd truncates in place: upload beside it and rename, so no Node ever loads half a bundle.
      const temporary = `${bundle.sandboxPath}.${randomBytes(4).toString("hex")}.tmp`;
      await sandbox.files.write(temporary, bundle.code, {
        user: "root",
        requestTimeoutMs: config.requestTimeoutMs,
      });
      await sandbox.files.rename(temporary, bundle.sandboxPath, {
        user: "root",
        requestTimeoutMs: config.requestTimeoutMs,
      });
    }
    await runChore(sandbox, STOP_PREVIOUS, [], chore);
    // A token file per start: a start elsewhere (another host's runtime dir) never hands over ours.
    const tokenFile = `${SANDBOX_PATHS.berthDir}/gateway-${credentials.instanceNonce}.token`;
    await sandbox.files.write(tokenFile, credentials.token, {
      user: "root",
      requestTimeoutMs: config.requestTimeoutMs,
    });
    const launched = await sandbox.commands.run(
      scriptLine(LAUNCH, "gateway", [config.nodeCommand, bundle.sandboxPath]),
      {
        background: true,
        user: "root",
        cwd: "/",
        timeoutMs: 0,
        requestTimeoutMs: config.requestTimeoutMs,
        envs: {
          [GATEWAY_ENV.listen]: `tcp:127.0.0.1:${credentials.port}`,
          [GATEWAY_ENV.tokenFile]: tokenFile,
          BERTH_GATEWAY_TOKEN_FILE_DELETE: "1",
          [GATEWAY_ENV.nonce]: credentials.instanceNonce,
          [GATEWAY_ENV.defaultCallTimeoutMs]: String(config.gateway.callTimeoutMs),
          [GATEWAY_ENV.mcpUser]: `${known.uid}:${known.gid}`,
          [GATEWAY_ENV.mcpHome]: known.home,
          [GATEWAY_ENV.workdir]: config.workdir,
        },
      },
    );
    // The gateway outlives this stream: envd keeps processes running after their client left.
    await launched.disconnect();
  } catch (error) {
    throw toAppError(error, "start the MCP gateway", { sandboxId: sandbox.sandboxId });
  }
  // On file before the health wait, so a process that skipped the lock (another host) finds it.
  await writeCredentials(file, credentials);
  const gateway = connect(sandbox, config, credentials);
  await waitForGatewayHealthy(gateway.client, credentials.instanceNonce, {
    timeoutMs: config.gateway.startTimeoutMs,
    diagnostics: async () =>
      (await runChore(sandbox, `tail -c 4000 ${SANDBOX_PATHS.gatewayLog}`, [], chore)).stdout,
  }).catch((error: unknown) => {
    gateway.transport.close();
    throw error instanceof AppError
      ? new AppError(error.code, `${error.message} (sandbox ${sandbox.sandboxId})`, {
          cause: error,
          userMessage: error.userMessage,
          details: error.details ? { ...error.details } : undefined,
        })
      : error;
  });
  return gateway;
}

/** Forgets a sandbox's credentials (it was killed). */
export async function removeCredentials(runtimeDir: string, sandboxId: string): Promise<void> {
  await fs.rm(credentialsPath(runtimeDir, sandboxId), { force: true });
}
