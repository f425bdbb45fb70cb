import { z } from "zod";
import type { MachineUsage } from "@/server/workspace/drivers/machine-usage";
import type { KubeClient } from "./kube-client";
import { PodExecutor } from "./pod-exec";
import { POD } from "./workspace-manifests";

/**
 * A workspace Pod's resource use, as a cluster tells it:
 * - CPU and memory from the resource metrics API (`metrics.k8s.io/v1beta1` PodMetrics, what metrics-server
 *   serves and `kubectl top` reads), summed over the Pod's containers. Its CPU figure is a rate the
 *   metrics pipeline averaged over its window, not cumulative time; memory is the working set. A cluster
 *   without metrics-server, or one that has not scraped the Pod yet, answers 404: both figures are null.
 * - Disk (the workdir and home folders) and the process count (both containers, each its own PID
 *   namespace) from one short exec per container: the metrics API reports neither.
 */
export async function podUsage(kube: KubeClient, pod: string): Promise<MachineUsage | null> {
  const current = await kube.readOrNull("read the workspace Pod", () =>
    kube.core.readNamespacedPod({ namespace: kube.namespace, name: pod }),
  );
  if (!current || current.status?.phase !== "Running" || current.metadata?.deletionTimestamp) return null;
  const [metrics, workspace, gateway] = await Promise.all([
    podMetrics(kube, pod),
    inside(kube, pod, POD.workspace, [POD.workdir, POD.home]),
    inside(kube, pod, POD.gateway, []),
  ]);
  return {
    cpuSeconds: null,
    cpuPercent: metrics ? metrics.cores * 100 : null,
    memoryBytes: metrics?.memoryBytes ?? null,
    diskBytes: workspace.diskBytes,
    processes:
      workspace.processes === null || gateway.processes === null
        ? null
        : workspace.processes + gateway.processes,
  };
}

const ZPodMetrics = z.object({
  kind: z.literal("PodMetrics"),
  containers: z.array(
    z.object({ name: z.string(), usage: z.object({ cpu: z.string(), memory: z.string() }) }),
  ),
});

async function podMetrics(
  kube: KubeClient,
  pod: string,
): Promise<{ cores: number; memoryBytes: number } | null> {
  const answer: unknown = await kube.readOrNull("read the workspace Pod's metrics", () =>
    kube.custom.getNamespacedCustomObject({
      group: "metrics.k8s.io",
      version: "v1beta1",
      namespace: kube.namespace,
      plural: "pods",
      name: pod,
    }),
  );
  if (answer === null) return null;
  const metrics = ZPodMetrics.parse(answer);
  let cores = 0;
  let memoryBytes = 0;
  for (const container of metrics.containers) {
    cores += quantity(container.usage.cpu);
    memoryBytes += quantity(container.usage.memory);
  }
  return { cores, memoryBytes: Math.round(memoryBytes) };
}

const SUFFIXES: Record<string, number> = {
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  "": 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/** A Kubernetes quantity (`1234567n`, `250m`, `51200Ki`, `1.5Gi`, `2e3`) as a number. */
function quantity(text: string): number {
  const match = /^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$/.exec(
    text.trim(),
  );
  if (!match) throw new Error(`not a Kubernetes quantity: ${text}`);
  const value = Number(match[1]);
  return match[2] ? value * 10 ** Number(match[2].slice(1)) : value * SUFFIXES[match[3] ?? ""]!;
}

/**
 * `du -sk` of the given folders and this container's process count, fork-free after du: the glob over
 * /proc is the shell's own, and the shell itself is not counted.
 */
const FIGURES = '[ $# -eq 0 ] || du -sk "$@" 2>/dev/null; set -- /proc/[0-9]*; echo "processes $(($# - 1))"';

async function inside(
  kube: KubeClient,
  pod: string,
  container: string,
  folders: string[],
): Promise<{ diskBytes: number | null; processes: number | null }> {
  const executor = new PodExecutor(kube, { namespace: kube.namespace, pod, container });
  const { stdout } = await executor.run(["/bin/sh", "-c", FIGURES, "figures", ...folders]);
  let diskBytes: number | null = folders.length > 0 ? 0 : null;
  let processes: number | null = null;
  for (const line of stdout.split("\n")) {
    const counted = /^processes (\d+)$/.exec(line);
    if (counted) processes = Number(counted[1]);
    const used = /^(\d+)\t/.exec(line);
    if (used && diskBytes !== null) diskBytes += Number(used[1]) * 1024;
  }
  return { diskBytes, processes };
}
