/**
 * Issue 14 with issue 11's installations: two Berth installations (each its own database, so its own
 * installation id, and its own Redis prefix) whose workers share ONE namespace of one cluster (the loopback
 * kube-apiserver emulator), each reconciling. Each lists and reaps only the Pods and claims labelled with its
 * own id: its orphan goes, the other installation's workspace and a claim from before installation labels
 * (owner unknown) stay.
 */
import { randomBytes } from "node:crypto";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import {
  databaseName,
  dropDatabase,
  ensureDatabase,
  migrateDeploy,
  withDatabase,
} from "@/scripts/services/database";
import {
  BASE_IMAGE,
  describeKube,
  startEmulatorWithClients,
  GATEWAY_START_TIMEOUT_MS,
} from "../support/kube-env";
import {
  installationCalls,
  startChild,
  stopChildren,
  type Child,
} from "../../../integration/multiprocess/processes";

type Report = { reapedOrphans: Array<{ workspaceId: string | null }> };

describeKube("installations sharing one Kubernetes namespace", { timeout: 600_000 }, () => {
  const run = randomBytes(3).toString("hex");
  const secondDatabase = withDatabase(
    process.env.DATABASE_URL!,
    `${databaseName(process.env.DATABASE_URL!)}_k8s_b`,
  );
  let kube: Awaited<ReturnType<typeof startEmulatorWithClients>>;
  let children: Child[] = [];

  beforeAll(async () => {
    kube = await startEmulatorWithClients();
    await ensureDatabase(secondDatabase);
    await migrateDeploy(secondDatabase);
  }, 300_000);
  afterEach(async (context) => {
    await stopChildren(children, context.task.result?.state === "fail");
    children = [];
  });
  afterAll(async () => {
    await kube?.emulator.close();
    await dropDatabase(secondDatabase).catch(() => undefined);
  });

  async function startInstallation(name: string, databaseUrl: string) {
    const child = startChild("installation-process.ts", {
      DATABASE_URL: databaseUrl,
      BERTH_REDIS_PREFIX: `${process.env.BERTH_REDIS_PREFIX}-k8s-inst-${name}-${run}`,
      BERTH_WORKSPACE_BACKEND: "kubernetes",
      BERTH_K8S_KUBECONFIG: kube.emulator.kubeconfigPath,
      BERTH_K8S_GATEWAY_START_TIMEOUT_MS: String(GATEWAY_START_TIMEOUT_MS),
      BERTH_K8S_IMAGE: BASE_IMAGE,
      BERTH_K8S_MEMORY_LIMIT: "768Mi",
      LOG_LEVEL: "silent",
    });
    children.push(child);
    await child.nextLine((line) => line === "ready");
    return installationCalls(child, name);
  }

  /** The uids of a Pod and its claim (`<pod>-data`), or null for each that is not there. */
  const uidsOf = async (pod: string) => {
    const read = (reader: Promise<{ metadata?: { uid?: string } }>) =>
      reader.then(
        (object) => object.metadata?.uid ?? null,
        () => null,
      );
    return {
      pod: await read(kube.core.readNamespacedPod({ namespace: kube.namespace, name: pod })),
      claim: await read(
        kube.core.readNamespacedPersistentVolumeClaim({ namespace: kube.namespace, name: `${pod}-data` }),
      ),
    };
  };

  it("each installation reconciles only its own Pods and claims", async () => {
    const a = await startInstallation("a", process.env.DATABASE_URL!);
    const b = await startInstallation("b", secondDatabase);
    const [idA, idB] = [await a("installation"), await b("installation")];
    expect(idA).not.toBe(idB);

    const provision = async (call: typeof a, workspaceId: string) =>
      (await call("provision", { workspaceId })) as string;
    const keptA = await provision(a, `ka${run}`);
    const orphanA = await provision(a, `oa${run}`);
    const keptB = await provision(b, `kb${run}`);
    const pod = await kube.core.readNamespacedPod({ namespace: kube.namespace, name: keptB });
    expect(pod.metadata?.labels?.["berth.dev/installation"]).toBe(idB);
    const before = { keptA: await uidsOf(keptA), keptB: await uidsOf(keptB) };
    for (const uids of Object.values(before)) expect(uids.pod && uids.claim).toBeTruthy();

    // A claim from before installation labels: Berth's labels, no installation. Nobody knows its owner.
    const legacy = `berth-ws-legacy${run}-00000000`;
    await kube.core.createNamespacedPersistentVolumeClaim({
      namespace: kube.namespace,
      body: {
        metadata: {
          name: `${legacy}-data`,
          labels: {
            "app.kubernetes.io/managed-by": "berth",
            "app.kubernetes.io/component": "workspace",
            "berth.dev/workspace-key": `legacy${run}`,
            "berth.dev/workspace": `legacy${run}`,
          },
        },
        spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
      },
    });

    // A's own orphan: its record goes, its Pod and claim stay behind.
    await a("forget", { workspaceId: `oa${run}` });

    const reportA = (await a("reconcile")) as Report;
    expect(reportA.reapedOrphans.map((orphan) => orphan.workspaceId)).toEqual([`oa${run}`]);
    const reportB = (await b("reconcile")) as Report;
    expect(reportB.reapedOrphans).toEqual([]);

    expect(await uidsOf(orphanA)).toEqual({ pod: null, claim: null });
    // The same objects, never replaced or recreated by the other installation's reconcile.
    expect(await uidsOf(keptA)).toEqual(before.keptA);
    expect(await uidsOf(keptB)).toEqual(before.keptB);
    expect((await uidsOf(legacy)).claim).not.toBeNull();
  });
});
