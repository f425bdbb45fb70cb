import { randomBytes } from "node:crypto";
import type * as k8s from "@kubernetes/client-node";
import { z } from "zod";
import { AppError, isAppError } from "@/server/shared/errors";
import { GatewayClient, gatewayStartFailed } from "@/server/workspace/gateway/client/gateway-client";
import { GatewayConnector } from "@/server/workspace/gateway/client/gateway-connector";
import { HttpGatewayTransport } from "@/server/workspace/gateway/client/gateway-transport";
import type { GatewayBundle } from "@/server/workspace/gateway/bundle-gateway";
import { GATEWAY_ENV } from "@/server/workspace/gateway/gateway-protocol";
import { ExecTunnel } from "./exec-tunnel";
import type { KubeClient } from "./kube-client";
import type { KubernetesDriverConfig } from "./kubernetes-config";
import { LABELS, labelValue, MANAGED_BY, type MachineNames } from "./kubernetes-names";
import { PodExecutor } from "./pod-exec";
import { POD } from "./workspace-manifests";

/**
 * Where a Pod's gateway credentials live: the Secret's name and its labels (the workspace key, which reap
 * selects by, or the pool machine's id; the Secret is garbage-collected with its Pod either way).
 */
export type CredentialsStore = { secret: string; labels: Record<string, string> };

export function credentialsStoreOf(names: MachineNames, workspaceKey: string | null): CredentialsStore {
  return {
    secret: names.secret,
    labels: {
      [LABELS.managedBy]: MANAGED_BY,
      ...(workspaceKey ? { [LABELS.key]: workspaceKey } : {}),
      ...(names.pool ? { [LABELS.pool]: labelValue(names.pool) } : {}),
    },
  };
}

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
 * and records its own pid. The script returns once the gateway listens (its socket is there), it exited,
 * or $3 seconds passed: waiting here costs a shell loop, while asking through the tunnel costs a Node start
 * in the gateway container per try, under the same CPU limit as the gateway's own start (on a loaded
 * machine the tries kept it from starting within 30 s). $1 nonce, $2 default call timeout.
 */
const LAUNCH = [
  `umask 077; cat > ${POD.gatewayTokenFile} || exit 1`,
  `export ${GATEWAY_ENV.listen}=unix:${POD.gatewaySocket} ${GATEWAY_ENV.tokenFile}=${POD.gatewayTokenFile}`,
  `export BERTH_GATEWAY_TOKEN_FILE_DELETE=1 ${GATEWAY_ENV.nonce}="$1" ${GATEWAY_ENV.defaultCallTimeoutMs}="$2"`,
  `export ${GATEWAY_ENV.workdir}=${POD.workdir}`,
  `rm -f ${POD.gatewaySocket} ${POD.gatewayPidFile}`,
  `setsid /bin/sh -c 'echo $$ > "$0"; exec node "$1" >> "$2" 2>&1 < /dev/null' ${POD.gatewayPidFile} ${POD.gatewayBundle} ${POD.gatewayLog} &`,
  "give_up=$(( $(date +%s) + $3 ))",
  `while [ ! -S ${POD.gatewaySocket} ] && [ "$(date +%s)" -lt "$give_up" ]; do`,
  `  p=$(cat ${POD.gatewayPidFile} 2>/dev/null)`,
  // Exited (or replaced by a newer claim's launch): the health wait that follows reads the Secret and the log.
  '  if [ -n "$p" ] && ! kill -0 "$p" 2>/dev/null; then exit 0; fi',
  "  sleep 0.05",
  "done",
  "exit 0",
].join("\n");

/**
 * `claimedAt` (ms since the epoch): a gateway claimed less than a start timeout ago and not yet `started`
 * is being started by someone, not dead. `started`: it answered once; if it no longer does, it died.
 */
const ZCredentials = z.object({
  token: z.string().min(16),
  nonce: z.string().min(1),
  podUid: z.string().min(1),
  claimedAt: z.coerce.number(),
  started: z.enum(["yes", "no"]).default("no"),
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

/** The stored credentials (null unless they are this Pod's) and the Secret's version, for compare-and-swap. */
async function readCredentials(
  kube: KubeClient,
  name: string,
  podUid: string,
): Promise<{ credentials: Credentials | null; resourceVersion: string | null }> {
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
  return {
    credentials: parsed.success && parsed.data.podUid === podUid ? parsed.data : null,
    resourceVersion: secret?.metadata?.resourceVersion ?? null,
  };
}

/**
 * Claims the right to start the gateway by writing its credentials with compare-and-swap: create when there
 * was no Secret, else replace at the version read. Of processes starting at once exactly one wins; the
 * others get a 409 and follow the winner. The Secret is owned by the Pod (garbage-collected with it).
 */
async function claimCredentials(
  kube: KubeClient,
  store: CredentialsStore,
  pod: k8s.V1Pod,
  credentials: Credentials,
  readVersion: string | null,
): Promise<boolean> {
  const name = store.secret;
  const body: k8s.V1Secret = {
    apiVersion: "v1",
    kind: "Secret",
    type: "Opaque",
    metadata: {
      name,
      labels: store.labels,
      ownerReferences: [
        { apiVersion: "v1", kind: "Pod", name: pod.metadata!.name!, uid: pod.metadata!.uid! },
      ],
      ...(readVersion ? { resourceVersion: readVersion } : {}),
    },
    data: Object.fromEntries(
      Object.entries(credentials).map(([key, value]) => [key, Buffer.from(String(value)).toString("base64")]),
    ),
  };
  try {
    await kube.call("store the gateway credentials", () =>
      readVersion
        ? kube.core.replaceNamespacedSecret({ namespace: kube.namespace, name, body })
        : kube.core.createNamespacedSecret({ namespace: kube.namespace, body }),
    );
    return true;
  } catch (error) {
    // 409 (Conflict or AlreadyExists): another process claimed it first. 404: it was deleted meanwhile.
    if (isAppError(error) && (error.code === "CONFLICT" || error.code === "NOT_FOUND")) return false;
    throw error;
  }
}

/** Records that the instance answered (so a later failure to answer means it died); lost races are fine. */
async function markStarted(
  kube: KubeClient,
  store: CredentialsStore,
  pod: k8s.V1Pod,
  credentials: Credentials,
) {
  const stored = await readCredentials(kube, store.secret, credentials.podUid);
  if (stored.credentials?.nonce !== credentials.nonce || !stored.resourceVersion) return;
  await claimCredentials(kube, store, pod, { ...credentials, started: "yes" }, stored.resourceVersion);
}

/** Stops an earlier instance, installs the bundle when it is not the current one, and starts the gateway. */
async function launchGateway(
  executor: PodExecutor,
  config: KubernetesDriverConfig,
  credentials: Credentials,
  bundle: () => Promise<GatewayBundle>,
): Promise<void> {
  const code = await bundle();
  // Each step within the start's own bound: an exec that never ends must fail the start, not wedge it.
  const bounded = { timeoutMs: config.gateway.startTimeoutMs };
  const prepared = await executor.run(["/bin/sh", "-c", PREPARE, "prepare", code.sha256], undefined, bounded);
  if (prepared.exitCode !== 0) {
    throw new AppError("INTERNAL", `could not prepare the gateway container: ${prepared.stderr.trim()}`);
  }
  if (prepared.stdout.trim() !== "current") {
    const installed = await executor.run(["/bin/sh", "-c", INSTALL, POD.gatewayBundle], code.code, bounded);
    if (installed.exitCode !== 0) {
      throw new AppError("INTERNAL", `could not install the gateway bundle: ${installed.stderr.trim()}`);
    }
  }
  const launched = await executor.run(
    [
      "/bin/sh",
      "-c",
      LAUNCH,
      "launch",
      credentials.nonce,
      String(config.gateway.callTimeoutMs),
      String(Math.ceil(config.gateway.startTimeoutMs / 1000)),
    ],
    `${credentials.token}\n`,
    bounded,
  );
  if (launched.exitCode !== 0)
    throw new AppError("INTERNAL", `could not start the gateway: ${launched.stderr.trim()}`);
}

/**
 * Waits until the gateway of `mine` answers, or until the Secret names a newer instance, which it then
 * follows (the Secret is the arbiter: whoever claimed it last is the one starting). Null at the deadline.
 * Only the process that launched an instance asks it for its health while it starts; the others read the
 * Secret until the launcher has marked it started. Every health check is an exec session running Node in
 * the gateway container, under that container's CPU limit: several processes polling it at once kept the
 * new gateway from ever answering in time on a busy machine.
 */
async function waitForAnyHealthy(
  kube: KubeClient,
  config: KubernetesDriverConfig,
  tunnel: ExecTunnel,
  store: CredentialsStore,
  mine: Credentials,
  deadline: number,
  role: "launcher" | "follower",
): Promise<PodGateway | null> {
  let current = mine;
  let launcher = role === "launcher";
  let checkedSecretAt = Date.now();
  for (let delay = 10; ; delay = Math.min(delay * 2, 250)) {
    const remaining = deadline - Date.now();
    const healthTimeout = Math.max(100, Math.min(launcher ? 2_000 : 5_000, remaining));
    if (launcher || current.started === "yes") {
      const gateway = clientOf(tunnel, config, current);
      if (await gateway.client.healthOf(current.nonce, healthTimeout)) return gateway;
    }
    if (!launcher || Date.now() - checkedSecretAt > 500) {
      checkedSecretAt = Date.now();
      const { credentials: stored } = await readCredentials(kube, store.secret, mine.podUid);
      if (stored && (stored.nonce !== current.nonce || stored.started !== current.started)) {
        // Another process claimed it since: that one is starting it now.
        if (stored.nonce !== current.nonce) launcher = false;
        current = stored;
      }
    }
    if (Date.now() + delay > deadline) return null;
    await new Promise((resolve) => setTimeout(resolve, delay));
  }
}

/**
 * The Pod's MCP gateway, reached through an exec tunnel: the running instance when its credentials (the
 * Secret) belong to this Pod and it answers with their nonce (every other attached process keeps working),
 * else a fresh instance with a new token, started by whichever process wins the credentials' compare-and-
 * swap, and healthy before this resolves.
 */
export async function attachGateway(
  kube: KubeClient,
  config: KubernetesDriverConfig,
  store: CredentialsStore,
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
    const executor = new PodExecutor(kube, gatewayTarget(kube, podName));
    const startTimeout = config.gateway.startTimeoutMs;
    // A bound in time, not in rounds: a lost compare-and-swap means another process claimed the gateway,
    // and the next round follows its claim. Counting those rounds made four processes attaching at once on
    // a busy machine give up while one of them was still starting the gateway.
    const giveUpAt = Date.now() + 3 * startTimeout;
    while (Date.now() < giveUpAt) {
      const stored = await readCredentials(kube, store.secret, podUid);
      if (stored.credentials) {
        const attached = clientOf(tunnel, config, stored.credentials);
        if (await attached.client.healthOf(stored.credentials.nonce, 5_000)) return attached;
        // Claimed recently: another process is starting it. Follow it until its start is overdue.
        const overdueAt = stored.credentials.claimedAt + startTimeout;
        if (stored.credentials.started === "no" && Date.now() < overdueAt) {
          const followed = await waitForAnyHealthy(
            kube,
            config,
            tunnel,
            store,
            stored.credentials,
            overdueAt,
            "follower",
          );
          if (followed) return followed;
          continue;
        }
      }
      onStarting?.();
      const credentials: Credentials = {
        token: randomBytes(32).toString("base64url"),
        nonce: randomBytes(16).toString("hex"),
        podUid,
        claimedAt: Date.now(),
        started: "no",
      };
      // Lost the compare-and-swap: the next round finds the winner's fresh claim and follows it.
      if (!(await claimCredentials(kube, store, pod, credentials, stored.resourceVersion))) continue;
      await launchGateway(executor, config, credentials, bundle);
      const started = await waitForAnyHealthy(
        kube,
        config,
        tunnel,
        store,
        credentials,
        Date.now() + startTimeout,
        "launcher",
      );
      if (started) {
        if (started.instanceNonce === credentials.nonce) await markStarted(kube, store, pod, credentials);
        return started;
      }
      const log = await executor
        .run(["tail", "-c", "4000", POD.gatewayLog], undefined, { timeoutMs: 10_000 })
        .then(
          (result) => result.stdout,
          () => undefined,
        );
      throw gatewayStartFailed(startTimeout, log);
    }
    throw new AppError(
      "UNAVAILABLE",
      `could not start the MCP gateway of ${podName}: its credentials kept changing for ${(3 * startTimeout) / 1000} s`,
    );
  } catch (error) {
    await tunnel.close();
    throw error;
  }
}
