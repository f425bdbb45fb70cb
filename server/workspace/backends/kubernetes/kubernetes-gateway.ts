import { randomBytes } from "node:crypto";
import type * as k8s from "@kubernetes/client-node";
import { z } from "zod";
import { AppError, isAppError } from "@/server/shared/errors";
import { GatewayClient, waitForGatewayHealthy } from "@/server/workspace/gateway/client/gateway-client";
import { GatewayConnector } from "@/server/workspace/gateway/client/gateway-connector";
import { HttpGatewayTransport } from "@/server/workspace/gateway/client/gateway-transport";
import type { GatewayBundle } from "@/server/workspace/gateway/bundle-gateway";
import { GATEWAY_ENV } from "@/server/workspace/gateway/gateway-protocol";
import { ExecTunnel } from "./exec-tunnel";
import type { KubeClient } from "./kube-client";
import type { KubernetesDriverConfig } from "./kubernetes-config";
import { gatewaySecretName, LABELS, MANAGED_BY, workspaceKey } from "./kubernetes-names";
import { PodExecutor } from "./pod-exec";
import { POD, type WorkspaceOwner } from "./workspace-manifests";

/** A gateway this process can talk to: through its own exec tunnel, with the running instance's token. */
export type PodGateway = {
  client: GatewayClient;
  connector: GatewayConnector;
  tunnel: ExecTunnel;
  instanceNonce: string;
};

/**
 * One chore before every launch: stop an earlier gateway (SIGTERM so it closes its MCP servers, SIGKILL
 * after 3 s; only if the pid IS a gateway), truncate the log, and say whether the bundle there is current
 * ($1 = its sha256), so the 1.4 MB bundle crosses the API server once per Pod, not once per launch.
 */
const PREPARE = [
  `p=$(cat ${POD.gatewayPidFile} 2>/dev/null)`,
  'if [ -n "$p" ] && grep -q berth-gateway "/proc/$p/cmdline" 2>/dev/null && kill -TERM "$p" 2>/dev/null; then',
  '  i=0; while kill -0 "$p" 2>/dev/null && [ $i -lt 150 ]; do sleep 0.02; i=$((i+1)); done',
  '  kill -KILL "$p" 2>/dev/null',
  "fi",
  `: > ${POD.gatewayLog}`,
  `[ -f ${POD.gatewayBundle} ] && [ "$(sha256sum < ${POD.gatewayBundle} | cut -d' ' -f1)" = "$1" ] && echo current`,
  "exit 0",
].join("\n");

/** $0 = the destination; the bundle arrives on stdin and replaces the file atomically. */
const INSTALL = 'umask 022; t="$0.tmp.$$"; cat > "$t" && mv -f "$t" "$0"';

/**
 * The token arrives on stdin into a file in the gateway's in-memory runtime dir, which the gateway reads
 * and deletes (it is never in argv or any environment). The gateway runs detached in a session of its own
 * and records its own pid. $1 nonce, $2 default call timeout.
 */
const LAUNCH = [
  `umask 077; cat > ${POD.gatewayTokenFile} || exit 1`,
  `export ${GATEWAY_ENV.listen}=unix:${POD.gatewaySocket} ${GATEWAY_ENV.tokenFile}=${POD.gatewayTokenFile}`,
  `export BERTH_GATEWAY_TOKEN_FILE_DELETE=1 ${GATEWAY_ENV.nonce}="$1" ${GATEWAY_ENV.defaultCallTimeoutMs}="$2"`,
  `export ${GATEWAY_ENV.workdir}=${POD.workdir}`,
  `setsid /bin/sh -c 'echo $$ > "$0"; exec node "$1" >> "$2" 2>&1 < /dev/null' ${POD.gatewayPidFile} ${POD.gatewayBundle} ${POD.gatewayLog} &`,
  "exit 0",
].join("\n");

const ZCredentials = z.object({
  token: z.string().min(16),
  nonce: z.string().min(1),
  podUid: z.string().min(1),
});
type Credentials = z.infer<typeof ZCredentials>;

function gatewayTarget(kube: KubeClient, pod: string) {
  return { namespace: kube.namespace, pod, container: POD.gateway };
}

function clientOf(tunnel: ExecTunnel, config: KubernetesDriverConfig, credentials: Credentials): PodGateway {
  const client = new GatewayClient(
    new HttpGatewayTransport({ socketPath: tunnel.socketPath }, credentials.token),
  );
  return {
    client,
    connector: new GatewayConnector(client, { defaultCallTimeoutMs: config.gateway.callTimeoutMs }),
    tunnel,
    instanceNonce: credentials.nonce,
  };
}

/** The credentials of the gateway running in THIS Pod (a Secret of an earlier Pod of the name does not count). */
async function readCredentials(kube: KubeClient, name: string, podUid: string): Promise<Credentials | null> {
  const secret = await kube.readOrNull("read the gateway credentials", () =>
    kube.core.readNamespacedSecret({ namespace: kube.namespace, name }),
  );
  const decoded = Object.fromEntries(
    Object.entries(secret?.data ?? {}).map(([key, value]) => [
      key,
      Buffer.from(value, "base64").toString("utf8"),
    ]),
  );
  const parsed = ZCredentials.safeParse(decoded);
  return parsed.success && parsed.data.podUid === podUid ? parsed.data : null;
}

/** Stores the credentials as a Secret owned by the Pod (garbage-collected with it), replacing older ones. */
async function writeCredentials(
  kube: KubeClient,
  owner: WorkspaceOwner,
  pod: k8s.V1Pod,
  credentials: Credentials,
) {
  const name = gatewaySecretName(owner);
  const body: k8s.V1Secret = {
    apiVersion: "v1",
    kind: "Secret",
    type: "Opaque",
    metadata: {
      name,
      labels: { [LABELS.managedBy]: MANAGED_BY, [LABELS.key]: workspaceKey(owner) },
      ownerReferences: [
        { apiVersion: "v1", kind: "Pod", name: pod.metadata!.name!, uid: pod.metadata!.uid! },
      ],
    },
    data: Object.fromEntries(
      Object.entries(credentials).map(([key, value]) => [key, Buffer.from(value).toString("base64")]),
    ),
  };
  for (let attempt = 0; attempt < 3; attempt++) {
    const existing = await kube.readOrNull("read the gateway credentials", () =>
      kube.core.readNamespacedSecret({ namespace: kube.namespace, name }),
    );
    try {
      if (!existing) {
        await kube.call("store the gateway credentials", () =>
          kube.core.createNamespacedSecret({ namespace: kube.namespace, body }),
        );
      } else {
        const replacement = {
          ...body,
          metadata: { ...body.metadata, resourceVersion: existing.metadata?.resourceVersion },
        };
        await kube.call("store the gateway credentials", () =>
          kube.core.replaceNamespacedSecret({ namespace: kube.namespace, name, body: replacement }),
        );
      }
      return;
    } catch (error) {
      if (!(isAppError(error) && error.code === "CONFLICT")) throw error;
    }
  }
  throw new AppError("UNAVAILABLE", `could not store the gateway credentials ${name}`);
}

/**
 * The Pod's MCP gateway, reached through an exec tunnel: the running instance when its credentials (the
 * Secret) belong to this Pod and it answers with their nonce (every other attached process keeps working),
 * else a fresh instance with a new token: the bundle installed if needed, launched, its credentials stored,
 * and healthy before this resolves.
 */
export async function attachGateway(
  kube: KubeClient,
  config: KubernetesDriverConfig,
  owner: WorkspaceOwner,
  pod: k8s.V1Pod,
  bundle: () => Promise<GatewayBundle>,
  onStarting?: () => void,
): Promise<PodGateway> {
  const podName = pod.metadata!.name!;
  const podUid = pod.metadata!.uid!;
  const tunnel = await ExecTunnel.open(
    kube,
    gatewayTarget(kube, podName),
    POD.gatewaySocket,
    config.tunnelDir,
  );
  try {
    const existing = await readCredentials(kube, gatewaySecretName(owner), podUid);
    if (existing) {
      const attached = clientOf(tunnel, config, existing);
      if (await attached.client.healthOf(existing.nonce, 5_000)) return attached;
    }
    onStarting?.();
    const credentials = {
      token: randomBytes(32).toString("base64url"),
      nonce: randomBytes(16).toString("hex"),
      podUid,
    };
    const executor = new PodExecutor(kube, gatewayTarget(kube, podName));
    const code = await bundle();
    const prepared = await executor.run(["/bin/sh", "-c", PREPARE, "prepare", code.sha256]);
    if (prepared.exitCode !== 0) {
      throw new AppError("INTERNAL", `could not prepare the gateway container: ${prepared.stderr.trim()}`);
    }
    if (prepared.stdout.trim() !== "current") {
      const installed = await executor.run(["/bin/sh", "-c", INSTALL, POD.gatewayBundle], code.code);
      if (installed.exitCode !== 0) {
        throw new AppError("INTERNAL", `could not install the gateway bundle: ${installed.stderr.trim()}`);
      }
    }
    // Stored before the launch so a concurrent attacher never finds a healthy gateway without its token.
    await writeCredentials(kube, owner, pod, credentials);
    const launched = await executor.run(
      ["/bin/sh", "-c", LAUNCH, "launch", credentials.nonce, String(config.gateway.callTimeoutMs)],
      `${credentials.token}\n`,
    );
    if (launched.exitCode !== 0)
      throw new AppError("INTERNAL", `could not start the gateway: ${launched.stderr.trim()}`);
    const gateway = clientOf(tunnel, config, credentials);
    await waitForGatewayHealthy(gateway.client, credentials.nonce, {
      timeoutMs: config.gateway.startTimeoutMs,
      diagnostics: async () => (await executor.run(["tail", "-c", "4000", POD.gatewayLog])).stdout,
    });
    return gateway;
  } catch (error) {
    await tunnel.close();
    throw error;
  }
}
