/**
 * Issue 14's proof through the engine, not the driver alone: two API processes and two worker processes
 * (separate Node processes over real Postgres and Redis, BERTH_WORKSPACE_BACKEND=kubernetes) against the
 * loopback kube-apiserver emulator. Concurrent first uses of one session's workspace provision it once:
 * one Pod, one claim. Under PER_SESSION, concurrent first uses of several sessions give each its own Pod
 * and claim, and none twice. The tests share the processes (each start costs seconds of CPU); each has its
 * own fresh workspaces, and the provision log is read per workspace.
 */
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import { getWorkspace } from "@/server/modules/workspace/workspace.data";
import {
  BASE_IMAGE,
  describeKube,
  startEmulatorWithClients,
  GATEWAY_START_TIMEOUT_MS,
} from "../support/kube-env";
import { createTestTenant, type TestTenant } from "../../../integration/db/fixtures";
import { freshSession } from "../../../integration/workspace/harness";
import {
  makeControlDir,
  readProvisionLog,
  resolveThrough,
  startChild,
  stopChildren,
  type Child,
} from "../../../integration/multiprocess/processes";
import { processBerth } from "@/server/composition/process-berth";

describeKube("multi-process provisioning on the Kubernetes backend", { timeout: 300_000 }, () => {
  let tenant: TestTenant;
  let kube: Awaited<ReturnType<typeof startEmulatorWithClients>>;
  let basedir: string;
  let controlDir: string;
  let children: Child[] = [];
  let apis: Child[] = [];
  let failed = false;

  beforeAll(async () => {
    tenant = await createTestTenant();
    kube = await startEmulatorWithClients();
    basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-mp-k8s-")));
    controlDir = await makeControlDir(basedir);
    const env = {
      BERTH_REDIS_PREFIX: `${process.env.BERTH_REDIS_PREFIX}-mpk-${randomBytes(3).toString("hex")}`,
      BERTH_WORKSPACE_BACKEND: "kubernetes",
      BERTH_WORKSPACE_BASEDIR: path.join(basedir, "workspaces"),
      BERTH_K8S_KUBECONFIG: kube.emulator.kubeconfigPath,
      BERTH_K8S_GATEWAY_START_TIMEOUT_MS: String(GATEWAY_START_TIMEOUT_MS),
      BERTH_K8S_IMAGE: BASE_IMAGE,
      BERTH_K8S_MEMORY_LIMIT: "768Mi",
      MP_CONTROL_DIR: controlDir,
      WORKERS_CONCURRENCY: "4",
      // Warnings and errors: a failed test prints each child's last lines.
      LOG_LEVEL: "warn",
    };
    // Two workers and two API replicas.
    apis = [startChild("api-process.ts", env), startChild("api-process.ts", env)];
    children = [startChild("worker-process.ts", env), startChild("worker-process.ts", env), ...apis];
    await Promise.all(children.map((child) => child.nextLine((line) => line === "ready")));
  });
  afterEach((context) => {
    failed ||= context.task.result?.state === "fail";
  });
  afterAll(async () => {
    await stopChildren(children, failed);
    // Closing the emulator removes every Pod's containers and every claim's folder.
    await kube?.emulator.close();
    if (basedir) await fs.rm(basedir, { recursive: true, force: true });
  });

  /**
   * Both API replicas at once, each making `calls` concurrent first uses spread over the sessions. An
   * answer that has not come well before the test's timeout fails with what the workspaces, the workers'
   * provision log and every child say (a CI run once waited out the whole timeout with nothing to show).
   */
  async function resolveFromTwoApis(sessionIds: string[], calls: number, workspaceIds: string[]) {
    const answers = Promise.all(
      apis.map((api) =>
        resolveThrough(api, { tenantId: tenant.tenantId, userId: tenant.owner.id, sessionIds, calls }),
      ),
    );
    let timer: NodeJS.Timeout | undefined;
    const overdue = new Promise<never>((_, reject) => {
      timer = setTimeout(() => void diagnosis(workspaceIds).then((text) => reject(new Error(text))), 200_000);
    });
    try {
      return await Promise.race([answers, overdue]);
    } finally {
      clearTimeout(timer);
    }
  }
  async function diagnosis(workspaceIds: string[]): Promise<string> {
    const records = await Promise.all(
      workspaceIds.map((workspaceId) =>
        getWorkspace(tenant.scope, workspaceId, processBerth().db).catch(String),
      ),
    );
    const objects = await Promise.all(
      workspaceIds.map((workspaceId) => objectsOf(workspaceId).catch(String)),
    );
    return [
      "no answer from the API processes within 200 s",
      `workspaces: ${JSON.stringify(records)}`,
      `their Pods and claims: ${JSON.stringify(objects)}`,
      `provision log: ${(await readProvisionLog(controlDir)).join(" / ")}`,
      ...children.map(
        (child) =>
          `child ${child.process.pid}: ${child.stderr().slice(-1500)} | ${child.unread().slice(-1500)}`,
      ),
    ].join("\n");
  }
  /** The provisions the workers started of `workspaceIds`. */
  const provisionStarts = async (workspaceIds: readonly string[]) =>
    (await readProvisionLog(controlDir)).filter(
      (line) => line.startsWith("start") && workspaceIds.includes(line.split(" ")[2]!),
    );

  /** Pod and claim names of one workspace, as the cluster has them (found by the workspace label). */
  async function objectsOf(workspaceId: string) {
    const labelSelector = `berth.dev/workspace=${workspaceId}`;
    const [pods, claims] = await Promise.all([
      kube.core.listNamespacedPod({ namespace: kube.namespace, labelSelector }),
      kube.core.listNamespacedPersistentVolumeClaim({ namespace: kube.namespace, labelSelector }),
    ]);
    return {
      pods: pods.items.map((pod) => pod.metadata!.name!),
      claims: claims.items.map((claim) => claim.metadata!.name!),
      running: pods.items.every((pod) => pod.status?.phase === "Running"),
    };
  }

  it("100 concurrent first uses of one workspace from two API processes → one provision, one Pod, one claim", async () => {
    const { session, workspaceId } = await freshSession(tenant.scope, "PER_AGENT", { backend: "kubernetes" });

    const results = await resolveFromTwoApis([session.id], 50, [workspaceId]);
    for (const result of results) expect(result).toEqual({ ok: 50, workspaceIds: [workspaceId], errors: [] });

    expect(await provisionStarts([workspaceId])).toHaveLength(1);
    const objects = await objectsOf(workspaceId);
    expect([objects.pods.length, objects.claims.length, objects.running]).toEqual([1, 1, true]);
    expect(objects.claims).toEqual([`${objects.pods[0]}-data`]);
    const record = await getWorkspace(tenant.scope, workspaceId, processBerth().db);
    expect([record.state, record.backendKind]).toEqual(["READY", "kubernetes"]);
  });

  it("PER_SESSION: concurrent first uses of three sessions → three distinct Pods and claims, each made once", async () => {
    const sessions = await Promise.all(
      [0, 1, 2].map(() => freshSession(tenant.scope, "PER_SESSION", { backend: "kubernetes" })),
    );
    const workspaceIds = sessions.map((fresh) => fresh.workspaceId).sort();
    expect(new Set(workspaceIds).size).toBe(3);

    const results = await resolveFromTwoApis(
      sessions.map((fresh) => fresh.session.id),
      30,
      workspaceIds,
    );
    for (const result of results) expect(result).toEqual({ ok: 30, workspaceIds, errors: [] });

    const starts = await provisionStarts(workspaceIds);
    expect(starts.map((line) => line.split(" ")[2]).sort()).toEqual(workspaceIds);
    const objects = await Promise.all(workspaceIds.map((workspaceId) => objectsOf(workspaceId)));
    for (const each of objects)
      expect([each.pods.length, each.claims.length, each.running]).toEqual([1, 1, true]);
    expect(new Set(objects.map((each) => each.pods[0])).size).toBe(3);
    expect(new Set(objects.map((each) => each.claims[0])).size).toBe(3);
  });
});
