import type * as k8s from "@kubernetes/client-node";
import { AppError, isAppError } from "@/server/shared/errors";
import type { CreateProgress } from "@/server/workspace/drivers/driver";
import type { KubeClient } from "./kube-client";
import type { KubernetesDriverConfig } from "./kubernetes-config";
import { ANNOTATIONS, assertOwnObject } from "./kubernetes-names";
import {
  claimManifest,
  identityOf,
  podManifest,
  type ClaimLayout,
  type MachineIdentity,
  type WorkspaceOwner,
} from "./workspace-manifests";

export type Progress = (progress: CreateProgress) => void;

/** What a Pod's status says about it, for provisioning and liveness. */
export type PodVerdict =
  | { state: "running" }
  | { state: "terminating" }
  | { state: "failed"; reason: string }
  /** `fatal`: the kubelet will not get past it without a configuration change (bad image name, config). */
  | { state: "pending"; reason: string | null; fatal: boolean };

const FATAL_WAITING = new Set(["InvalidImageName", "CreateContainerConfigError", "ErrImageNeverPull"]);
const MAX_REPLACEMENTS = 3;

export function podVerdict(pod: k8s.V1Pod): PodVerdict {
  if (pod.metadata?.deletionTimestamp) return { state: "terminating" };
  const status = pod.status ?? {};
  const containers = status.containerStatuses ?? [];
  const terminated = containers.find((entry) => entry.state?.terminated);
  if (status.phase === "Failed" || status.phase === "Succeeded" || terminated) {
    if (status.reason) return { state: "failed", reason: `${status.reason}: ${status.message ?? ""}`.trim() };
    const end = terminated?.state?.terminated;
    return {
      state: "failed",
      reason: end
        ? `container ${terminated.name} terminated: ${end.reason ?? "Error"} (exit code ${end.exitCode})`
        : `Pod ${status.phase ?? "ended"}`,
    };
  }
  const expected = pod.spec?.containers.length ?? 0;
  if (
    status.phase === "Running" &&
    containers.length === expected &&
    containers.every((entry) => entry.ready && entry.state?.running)
  ) {
    return { state: "running" };
  }
  const waiting = containers.find(
    (entry) => entry.state?.waiting?.reason && entry.state.waiting.reason !== "ContainerCreating",
  );
  if (waiting?.state?.waiting) {
    const { reason = "", message } = waiting.state.waiting;
    return {
      state: "pending",
      reason: `container ${waiting.name}: ${reason}${message ? `: ${message}` : ""}`,
      fatal: FATAL_WAITING.has(reason),
    };
  }
  const unscheduled = status.conditions?.find(
    (condition) => condition.type === "PodScheduled" && condition.status === "False",
  );
  if (unscheduled)
    return {
      state: "pending",
      reason: `${unscheduled.reason ?? "Unschedulable"}: ${unscheduled.message ?? ""}`,
      fatal: false,
    };
  return { state: "pending", reason: null, fatal: false };
}

/** A verdict in words: its reason when it has one, else its state. */
export function verdictReason(verdict: PodVerdict): string {
  return "reason" in verdict && verdict.reason ? verdict.reason : verdict.state;
}

/** The verdict's reason plus the Pod's latest distinct Warning events (the scheduler's and kubelet's words). */
export async function explainPod(
  kube: KubeClient,
  pod: k8s.V1Pod,
  verdictReason: string | null,
): Promise<string> {
  const uid = pod.metadata?.uid;
  const events = uid
    ? await kube.core
        .listNamespacedEvent({ namespace: kube.namespace, fieldSelector: `involvedObject.uid=${uid}` })
        .then((list) => list.items)
        .catch(() => [] as k8s.CoreV1Event[])
    : [];
  const warnings = [
    ...new Set(
      events
        .filter((event) => event.type === "Warning")
        .sort((a, b) => String(a.lastTimestamp ?? "").localeCompare(String(b.lastTimestamp ?? "")))
        .map((event) => `${event.reason ?? "Warning"}: ${event.message ?? ""}`),
    ),
  ].slice(-3);
  const parts = [verdictReason, ...warnings.filter((warning) => !verdictReason?.includes(warning))].filter(
    Boolean,
  );
  return parts.length > 0 ? parts.join("; ") : "no reason reported";
}

async function sleep(ms: number) {
  await new Promise((resolve) => setTimeout(resolve, ms));
}

/** How long a deletion may take, and the longest pause between two reads while waiting for it. */
export type DeleteWait = Pick<KubernetesDriverConfig, "deleteTimeoutMs" | "pollIntervalMs">;

/** Polls until `gone()` holds, backing off up to `pollIntervalMs`; UNAVAILABLE naming `what` after the timeout. */
async function waitUntil(gone: () => Promise<boolean>, wait: DeleteWait, what: string): Promise<void> {
  const deadline = Date.now() + wait.deleteTimeoutMs;
  for (let delay = 25; !(await gone()); delay = Math.min(delay * 2, wait.pollIntervalMs)) {
    if (Date.now() > deadline)
      throw new AppError("UNAVAILABLE", `${what} did not finish within ${wait.deleteTimeoutMs} ms`);
    await sleep(delay);
  }
}

/** Deletes the Pod (if present) and waits until the API server no longer has it. */
export async function deletePodAndWait(
  kube: KubeClient,
  name: string,
  graceSeconds: number,
  wait: DeleteWait,
) {
  const existing = await kube.readOrNull("read the workspace Pod", () =>
    kube.core.readNamespacedPod({ namespace: kube.namespace, name }),
  );
  if (!existing) return false;
  const uid = existing.metadata?.uid;
  await kube.deleteIfPresent("delete the workspace Pod", () =>
    kube.core.deleteNamespacedPod({ namespace: kube.namespace, name, gracePeriodSeconds: graceSeconds }),
  );
  await waitUntil(
    async () => {
      const pod = await kube.readOrNull("read the workspace Pod", () =>
        kube.core.readNamespacedPod({ namespace: kube.namespace, name }),
      );
      return !pod || pod.metadata?.uid !== uid;
    },
    wait,
    `deleting Pod ${kube.namespace}/${name}`,
  );
  return true;
}

/** Deletes the claim (if present) and waits until it is gone (pvc-protection holds it while a Pod uses it). */
export async function deleteClaimAndWait(kube: KubeClient, name: string, wait: DeleteWait) {
  const deleted = await kube.deleteIfPresent("delete the workspace claim", () =>
    kube.core.deleteNamespacedPersistentVolumeClaim({ namespace: kube.namespace, name }),
  );
  await waitUntil(
    async () =>
      !(await kube.readOrNull("read the workspace claim", () =>
        kube.core.readNamespacedPersistentVolumeClaim({ namespace: kube.namespace, name }),
      )),
    wait,
    `deleting claim ${kube.namespace}/${name}`,
  );
  return deleted;
}

/** Create-or-get of the workdir's claim; a claim still terminating (an earlier purge) is awaited first. */
export async function ensureClaim(
  kube: KubeClient,
  config: KubernetesDriverConfig,
  owner: WorkspaceOwner | MachineIdentity,
  progress: Progress,
) {
  const { installation } = identityOf(owner);
  const body = claimManifest(config, owner);
  const name = body.metadata!.name!;
  for (let attempt = 0; attempt < 5; attempt++) {
    const existing = await kube.readOrNull("read the workspace claim", () =>
      kube.core.readNamespacedPersistentVolumeClaim({ namespace: kube.namespace, name }),
    );
    if (existing && !existing.metadata?.deletionTimestamp) {
      assertOwnObject(existing, installation);
      progress({ step: "claim.reused", detail: name });
      return existing;
    }
    if (existing) {
      progress({ step: "claim.terminating", detail: name });
      await deleteClaimAndWait(kube, name, config);
    }
    try {
      const created = await kube.call("create the workspace claim", () =>
        kube.core.createNamespacedPersistentVolumeClaim({ namespace: kube.namespace, body }),
      );
      progress({ step: "claim.created", detail: name });
      return created;
    } catch (error) {
      if (!(isAppError(error) && error.code === "CONFLICT")) throw error;
    }
  }
  throw new AppError("UNAVAILABLE", `could not create claim ${kube.namespace}/${name}`);
}

/**
 * Create-or-reattach of the workspace Pod, until it runs: a missing Pod is created (409: another process
 * did), a terminating one awaited, one of another configuration replaced, and a failed one (Evicted,
 * OOMKilled, any container ended) reported with its reason and replaced. A Pod that is still not Running
 * after `pendingTimeoutMs`, or whose containers cannot start without a configuration change, fails the
 * provision with the scheduler's or kubelet's reason, and is deleted so the next attempt starts afresh.
 */
export async function ensureRunningPod(
  kube: KubeClient,
  config: KubernetesDriverConfig,
  owner: WorkspaceOwner | MachineIdentity,
  progress: Progress,
  layout: ClaimLayout,
) {
  const { installation } = identityOf(owner);
  const body = podManifest(config, owner, layout);
  const name = body.metadata!.name!;
  const wantedHash = body.metadata!.annotations![ANNOTATIONS.specHash];
  const read = () =>
    kube.readOrNull("read the workspace Pod", () =>
      kube.core.readNamespacedPod({ namespace: kube.namespace, name }),
    );
  let created = false;
  let replacements = 0;
  let deadline = Date.now() + config.pendingTimeoutMs;
  for (let delay = 25; ; delay = Math.min(delay * 2, config.pollIntervalMs)) {
    const pod = await read();
    if (!pod) {
      try {
        await kube.call("create the workspace Pod", () =>
          kube.core.createNamespacedPod({ namespace: kube.namespace, body }),
        );
        created = true;
        deadline = Date.now() + config.pendingTimeoutMs;
        progress({ step: "pod.created", detail: name });
      } catch (error) {
        if (!(isAppError(error) && error.code === "CONFLICT")) throw error;
      }
      continue;
    }
    assertOwnObject(pod, installation);
    const verdict = podVerdict(pod);
    if (verdict.state === "terminating") {
      progress({ step: "pod.terminating", detail: name });
      await deletePodAndWait(kube, name, config.terminationGracePeriodSeconds, config);
      continue;
    }
    if (pod.metadata?.annotations?.[ANNOTATIONS.specHash] !== wantedHash) {
      progress({ step: "pod.replaced", detail: `${name}: its configuration changed` });
      await deletePodAndWait(kube, name, config.terminationGracePeriodSeconds, config);
      continue;
    }
    if (verdict.state === "failed") {
      const reason = await explainPod(kube, pod, verdict.reason);
      progress({ step: "pod.failed", detail: `${name}: ${reason}` });
      if (++replacements > MAX_REPLACEMENTS) {
        throw new AppError(
          "UNAVAILABLE",
          `Workspace Pod ${name} failed ${replacements} times; last: ${reason}`,
          {
            userMessage: `The workspace Pod keeps failing: ${reason}`,
          },
        );
      }
      await deletePodAndWait(kube, name, 0, config);
      progress({ step: "pod.replacing", detail: name });
      continue;
    }
    if (verdict.state === "running") {
      progress({ step: created ? "pod.running" : "pod.reattached", detail: name });
      return pod;
    }
    if (verdict.fatal || Date.now() > deadline) {
      const reason = await explainPod(kube, pod, verdict.reason);
      const waited = Math.round((Date.now() - (deadline - config.pendingTimeoutMs)) / 1000);
      progress({ step: "pod.stuck", detail: `${name}: ${reason}` });
      await deletePodAndWait(kube, name, 0, config).catch(() => undefined);
      throw new AppError(
        verdict.fatal ? "UNPROCESSABLE" : "UNAVAILABLE",
        `Workspace Pod ${name} ${verdict.fatal ? "cannot start" : `stayed Pending for ${waited} s`}: ${reason}`,
        { userMessage: `The workspace Pod could not start: ${reason}`, details: { pod: name } },
      );
    }
    await sleep(delay);
  }
}
