import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import { AppError } from "@/server/shared/errors";
import { loadGatewayBundle } from "@/server/workspace/gateway/bundle-gateway";
import { GatewayClient, waitForGatewayHealthy } from "@/server/workspace/gateway/client/gateway-client";
import { GatewayConnector } from "@/server/workspace/gateway/client/gateway-connector";
import { HttpGatewayTransport } from "@/server/workspace/gateway/client/gateway-transport";
import { GATEWAY_ENV } from "@/server/workspace/gateway/gateway-protocol";
import type { ExecOptions, ExecResult } from "@/server/workspace/drivers/port";
import type { SandboxIdentity } from "./sandbox-args";
import { traversableTree } from "./sandbox-dirs";
import {
  SANDBOX_GATEWAY_BUNDLE,
  SANDBOX_RUNTIME_DIR,
  SANDBOX_WORKDIR,
  type TSandboxConfig,
} from "./sandbox-config";

/**
 * What the gateway needs of its workspace's backend (the BubblewrapMachine): its sandbox settings and a way
 * to run a long-lived sandbox with extra mounts. Stated here so this file does not import the backend.
 */
export type SandboxGatewayHost = {
  readonly options: { config: TSandboxConfig; key: string; identity: SandboxIdentity };
  runSandboxed(
    argv: readonly string[],
    options: ExecOptions,
    extras: { mounts: Array<{ hostPath: string; target: string; readOnly?: boolean }>; tmpfs: string[] },
  ): Promise<ExecResult>;
};

export type SandboxGateway = {
  connector: GatewayConnector;
  /** Ends the gateway's sandbox (and with it every MCP server it started). Idempotent. */
  stop(): Promise<void>;
  /** Resolves when the sandbox has exited, for whatever reason. */
  readonly exited: Promise<void>;
};

const LOG_TAIL_BYTES = 4_000;

/**
 * Starts the in-sandbox MCP gateway (the Docker backend's, server/workspace/gateway) in a sandbox of its
 * own with the workspace's confinement, and resolves once it answers /health with this instance's nonce.
 * It listens on a unix socket in a runtime folder bind-mounted at /run/berth, so it needs no network (the
 * sandbox has none unless the operator allowed it); the bearer token travels in the sandbox's
 * environment, never in argv. stdio MCP servers are the gateway's children: same sandbox, same uid.
 *
 * One gateway per Berth process and workspace (its MCP servers are this process', as they were on the
 * host). Commands run in sandboxes of their own, without the runtime folder: the agent's shell can
 * neither see the gateway's processes nor reach its socket.
 */
export async function startSandboxGateway(backend: SandboxGatewayHost): Promise<SandboxGateway> {
  const { config, key, identity } = backend.options;
  const runtimeDir = path.join(
    config.runtimeRoot,
    "gw",
    `${key}-${process.pid}-${randomBytes(4).toString("hex")}`,
  );
  await traversableTree(config.runtimeRoot, path.dirname(runtimeDir));
  await fs.mkdir(runtimeDir, { recursive: true, mode: 0o700 });
  if (identity.dropped) await fs.chown(runtimeDir, identity.uid, identity.gid);
  const bundlePath = await writeGatewayBundle(config.runtimeRoot);

  const token = randomBytes(32).toString("base64url");
  const nonce = randomBytes(16).toString("hex");
  const abort = new AbortController();
  let log = "";
  const exited = backend
    .runSandboxed(
      [await fs.realpath(process.execPath), SANDBOX_GATEWAY_BUNDLE],
      {
        signal: abort.signal,
        env: {
          [GATEWAY_ENV.listen]: `unix:${SANDBOX_RUNTIME_DIR}/gateway.sock`,
          [GATEWAY_ENV.token]: token,
          [GATEWAY_ENV.nonce]: nonce,
          [GATEWAY_ENV.defaultCallTimeoutMs]: String(config.gateway.callTimeoutMs),
          [GATEWAY_ENV.workdir]: SANDBOX_WORKDIR,
        },
        maxBufferBytes: 0,
        onStderr: (chunk) => {
          log = (log + chunk.toString()).slice(-LOG_TAIL_BYTES);
        },
        onStdout: () => undefined,
      },
      {
        tmpfs: ["/run", "/opt"],
        mounts: [
          { hostPath: runtimeDir, target: SANDBOX_RUNTIME_DIR },
          { hostPath: bundlePath, target: SANDBOX_GATEWAY_BUNDLE, readOnly: true },
        ],
      },
    )
    .then(() => undefined);
  let stopped = false;
  const stop = async () => {
    if (!stopped) {
      stopped = true;
      abort.abort();
    }
    await exited;
    await fs.rm(runtimeDir, { recursive: true, force: true });
  };

  const client = new GatewayClient(
    new HttpGatewayTransport({ socketPath: path.join(runtimeDir, "gateway.sock") }, token),
  );
  const died = exited.then(() => {
    throw new AppError("UNAVAILABLE", "The workspace's MCP gateway exited while starting", {
      details: { gatewayLogTail: log },
    });
  });
  try {
    await Promise.race([
      waitForGatewayHealthy(client, nonce, {
        timeoutMs: config.gateway.startTimeoutMs,
        diagnostics: () => Promise.resolve(log),
      }),
      died,
    ]);
  } catch (error) {
    await stop();
    throw error;
  }
  died.catch(() => undefined);
  return {
    connector: new GatewayConnector(client, { defaultCallTimeoutMs: config.gateway.callTimeoutMs }),
    stop,
    exited,
  };
}

/**
 * The gateway's code, once per content, readable by every workspace uid (it holds no secret). Also the
 * egress forwarder's (its `egress` role, mounted into the commands that use egress).
 */
export async function writeGatewayBundle(runtimeRoot: string): Promise<string> {
  const bundle = await loadGatewayBundle();
  const file = path.join(runtimeRoot, `berth-gateway-${bundle.sha256.slice(0, 16)}.cjs`);
  const existing = await fs.stat(file).catch(() => null);
  if (existing?.isFile()) return file;
  await traversableTree(runtimeRoot, runtimeRoot);
  const temporary = `${file}.${randomBytes(4).toString("hex")}`;
  await fs.writeFile(temporary, bundle.code, { mode: 0o644 });
  await fs.rename(temporary, file);
  return file;
}
