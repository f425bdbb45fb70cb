import { createHash, randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { PassThrough, Readable } from "node:stream";
import * as k8s from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isAppError } from "@/server/shared/errors";
import type { CreateProgress, WorkspaceDriver, WorkspaceSpec } from "@/server/workspace/drivers/driver";
import type { KubeClient } from "@/server/workspace/drivers/kubernetes/kube-client";
import { claimName, podName } from "@/server/workspace/drivers/kubernetes/kubernetes-names";
import { PodExecutor } from "@/server/workspace/drivers/kubernetes/pod-exec";
import { createDriverTestbed, describeKube, type DriverTestbed } from "./support/kube-env";

async function text(stream: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

async function provision(driver: WorkspaceDriver, spec: WorkspaceSpec) {
  const progress: CreateProgress[] = [];
  const handle = await driver.create(spec, { onProgress: (step) => progress.push(step) });
  return { handle, progress, steps: progress.map((step) => step.step) };
}

async function failureOf(promise: Promise<unknown>) {
  const error = await promise.then(
    () => null,
    (caught: unknown) => caught,
  );
  if (!isAppError(error)) throw new Error(`expected an AppError, got ${String(error)}`);
  return error;
}

describeKube("Kubernetes driver: Pods that fail, vanish or never start", () => {
  let bed: DriverTestbed;
  let driver: WorkspaceDriver;
  /**
   * One workspace for the cases that break its Pod and watch it be replaced: each starts with a provision,
   * which reattaches to the running Pod (or replaces one an earlier case left broken), instead of starting a
   * Pod and its gateway of its own. Cases that need a workspace no Pod ever ran for, or another driver
   * configuration, make their own. The last case reaps it.
   */
  let shared: WorkspaceSpec;

  /** Runs a command in a Pod's gateway container with client-node's own Exec (stdout only). */
  const gatewayExec = async (pod: string, command: string[]) => {
    const out = new PassThrough();
    const chunks: Buffer[] = [];
    out.on("data", (chunk: Buffer) => chunks.push(chunk));
    await new Promise<void>((resolve, reject) => {
      new k8s.Exec(bed.kc)
        .exec(bed.namespace, pod, "gateway", command, out, null, null, false, () => resolve())
        .catch(reject);
    });
    return Buffer.concat(chunks).toString("utf8");
  };

  beforeAll(async () => {
    bed = await createDriverTestbed({ runtimeClasses: [{ name: "sandboxed", handler: "runc" }] });
    driver = bed.newDriver();
    shared = bed.specFor();
    await provision(driver, shared);
  });
  afterAll(async () => {
    await bed?.cleanup();
  });

  it("detects an evicted Pod, reports the kubelet's reason and replaces it on the same claim", async () => {
    const spec = shared;
    const first = await provision(driver, spec);
    const backend = await driver.attach(spec);
    await backend.writeFile("kept.txt", "survives eviction");

    await bed.emulator.evictPod(bed.namespace, first.handle.pod as string);
    expect(await driver.isAlive(backend)).toBe(false);
    const again = await provision(driver, spec);
    const failed = again.progress.find((step) => step.step === "pod.failed");
    expect(failed?.detail).toMatch(/Evicted: The node was low on resource: memory/);
    expect(again.steps).toEqual(
      expect.arrayContaining(["pod.replacing", "pod.created", "pod.running", "gateway.starting"]),
    );
    expect(again.handle.podUid).not.toBe(first.handle.podUid);
    const replaced = await driver.attach(spec);
    expect(await text(await replaced.readFile("kept.txt"))).toBe("survives eviction");
    await replaced.close();
    await backend.close();
  });

  it("keeps the agent's HOME on the claim: dotfiles and shell history survive the Pod's replacement", async () => {
    const spec = shared;
    const first = await provision(driver, spec);
    const backend = await driver.attach(spec);
    const wrote = await backend.exec([
      "sh",
      "-c",
      'mkdir -p ~/.config/tool && echo "theme=dark" > ~/.config/tool/settings && echo "ls -la" >> ~/.bash_history && echo "$HOME"',
    ]);
    expect([wrote.exitCode, wrote.stdout.toString()]).toEqual([0, "/home/berth\n"]);
    await backend.writeFile("work.txt", "in the workdir");
    await backend.close();

    // Deleted behind Berth's back (as an eviction or a node drain would): a new Pod on the same claim.
    await bed.core.deleteNamespacedPod({
      namespace: bed.namespace,
      name: first.handle.pod as string,
      gracePeriodSeconds: 0,
    });
    const again = await provision(driver, spec);
    expect(again.handle.podUid).not.toBe(first.handle.podUid);
    const replaced = await driver.attach(spec);
    const read = await replaced.exec(["sh", "-c", "cat ~/.config/tool/settings ~/.bash_history"]);
    expect(read.stdout.toString()).toBe("theme=dark\nls -la\n");
    // The workdir shows only the agent's files (HOME is a folder of the claim beside it, not inside it).
    const listed = (await replaced.exec(["ls", "-A"])).stdout.toString().split("\n");
    expect(listed).toContain("work.txt");
    expect(listed.filter((name) => name.startsWith("."))).toEqual([]);
    await replaced.close();
  });

  it("reuses a claim made before HOME moved onto claims as the whole workdir, with HOME in an emptyDir", async () => {
    const spec = bed.specFor();
    const pod = podName(spec);
    // The claim as the driver made it before, under the name it gives it: no layout annotation.
    const claim = await bed.core.createNamespacedPersistentVolumeClaim({
      namespace: bed.namespace,
      body: {
        metadata: {
          name: claimName(spec),
          labels: { "app.kubernetes.io/managed-by": "berth", "app.kubernetes.io/component": "workspace" },
        },
        spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
      },
    });
    const { steps } = await provision(driver, spec);
    expect(steps[0]).toBe("claim.reused");
    const created = await bed.core.readNamespacedPod({ namespace: bed.namespace, name: pod });
    const mounts = created.spec!.containers.find((container) => container.name === "workspace")!.volumeMounts;
    expect(mounts).toEqual(
      expect.arrayContaining([
        { name: "workdir", mountPath: "/workspace" },
        { name: "home", mountPath: "/home/berth" },
      ]),
    );
    const backend = await driver.attach(spec);
    await backend.writeFile("legacy.txt", "at the claim's root");
    expect((await backend.exec(["ls", "-A"])).stdout.toString()).toBe("legacy.txt\n");
    await backend.close();
    expect(claim.metadata?.annotations?.["berth.dev/claim-layout"]).toBeUndefined();
  });

  it("detects an OOM-killed container and a Pod deleted behind Berth's back", async () => {
    const spec = shared;
    const first = await provision(driver, spec);
    const backend = await driver.attach(spec);
    await backend.writeFile("data.txt", "still here");
    await bed.emulator.oomKillPod(bed.namespace, first.handle.pod as string, "workspace");
    const again = await provision(driver, spec);
    expect(again.progress.find((step) => step.step === "pod.failed")?.detail).toMatch(
      /container workspace terminated: OOMKilled \(exit code 137\)/,
    );

    await bed.core.deleteNamespacedPod({
      namespace: bed.namespace,
      name: first.handle.pod as string,
      gracePeriodSeconds: 0,
    });
    const recreated = await provision(driver, spec);
    expect(recreated.steps).toEqual([
      "claim.reused",
      "pod.created",
      "pod.running",
      "gateway.starting",
      "gateway.ready",
    ]);
    const attached = await driver.attach(spec);
    expect(await text(await attached.readFile("data.txt"))).toBe("still here");
    await attached.close();
    await backend.close();
  });

  it("bounds Berth's own execs: one that never ends, or never reads its stdin, fails UNAVAILABLE at its limit", async () => {
    const { handle } = await provision(driver, shared);
    // The executor a driver builds, over this test's kubeconfig (it needs nothing else of the client).
    const executor = new PodExecutor({ kc: bed.kc } as KubeClient, {
      namespace: bed.namespace,
      pod: handle.pod as string,
      container: "workspace",
    });
    const endless = await failureOf(executor.run(["sleep", "600"], undefined, { timeoutMs: 1_000 }));
    expect([endless.code, endless.message]).toEqual([
      "UNAVAILABLE",
      expect.stringMatching(/exec of sleep in .* did not finish within 1000 ms/),
    ]);
    // 8 MiB to a command that never reads: the stream stalls on backpressure, the bound still holds.
    const unread = await failureOf(
      executor.run(["sleep", "600"], Buffer.alloc(8 << 20), { timeoutMs: 1_000 }),
    );
    expect(unread.code).toBe("UNAVAILABLE");
    // The executor still works afterwards.
    expect(await executor.run(["echo", "ok"], undefined, { timeoutMs: 30_000 })).toMatchObject({
      exitCode: 0,
    });
  });

  it("fails a Pod stuck Pending with the scheduler's reason instead of hanging, and leaves no Pod behind", async () => {
    const picky = bed.newDriver({ nodeSelector: { disktype: "ssd" }, pendingTimeoutMs: 2_000 });
    const spec = bed.specFor();
    const progress: CreateProgress[] = [];
    const started = Date.now();
    const error = await failureOf(picky.create(spec, { onProgress: (step) => progress.push(step) }));
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(error.code).toBe("UNAVAILABLE");
    expect(error.message).toMatch(/stayed Pending .*didn't match Pod's node affinity\/selector/);
    expect(progress.find((step) => step.step === "pod.stuck")?.detail).toContain("FailedScheduling");
    const pods = await bed.core.listNamespacedPod({
      namespace: bed.namespace,
      labelSelector: `berth.dev/workspace=${spec.workspaceId}`,
    });
    expect(pods.items).toHaveLength(0);

    const missingImage = bed.newDriver({ image: "berth-missing-image:1", pendingTimeoutMs: 2_000 });
    const pull = await failureOf(missingImage.create(bed.specFor()));
    expect(pull.message).toMatch(/ImagePullBackOff|ErrImagePull/);
    const unknownRuntime = bed.newDriver({ runtimeClassName: "no-such-runtime" });
    const refused = await failureOf(unknownRuntime.create(bed.specFor()));
    expect(refused.code).toBe("FORBIDDEN");
    expect(refused.message).toContain('RuntimeClass "no-such-runtime" not found');
  });

  it("runs Pods with a configured RuntimeClass, and opens configured egress per tenant", async () => {
    const sandboxed = bed.newDriver({
      runtimeClassName: "sandboxed",
      tenantEgress: { "tenant-k8s": [{ cidr: "10.0.0.0/8", ports: [443] }] },
    });
    expect(sandboxed.isolation).toEqual({ isolated: true, sandbox: "sandboxed" });
    const { handle } = await provision(sandboxed, bed.specFor());
    const pod = await bed.core.readNamespacedPod({ namespace: bed.namespace, name: handle.pod as string });
    expect(pod.spec?.runtimeClassName).toBe("sandboxed");
    const policies = await bed.networking.listNamespacedNetworkPolicy({ namespace: bed.namespace });
    const tenant = policies.items.find((policy) =>
      policy.metadata?.name?.startsWith("berth-workspaces-egress-"),
    );
    expect(tenant?.spec).toMatchObject({
      podSelector: { matchLabels: { "berth.dev/tenant": "tenant-k8s" } },
      egress: [{ to: [{ ipBlock: { cidr: "10.0.0.0/8" } }], ports: [{ protocol: "TCP", port: 443 }] }],
    });
  });

  it("converges when several processes provision the same workspace at once: one Pod, one claim, one gateway", async () => {
    const spec = bed.specFor();
    const processes = [bed.newDriver(), bed.newDriver(), bed.newDriver(), bed.newDriver()];
    const handles = await Promise.all(processes.map((process) => process.create(spec)));
    expect(new Set(handles.map((handle) => handle.podUid)).size).toBe(1);
    const selector = `berth.dev/workspace=${spec.workspaceId}`;
    const pods = await bed.core.listNamespacedPod({ namespace: bed.namespace, labelSelector: selector });
    const claims = await bed.core.listNamespacedPersistentVolumeClaim({
      namespace: bed.namespace,
      labelSelector: selector,
    });
    expect([pods.items.length, claims.items.length]).toEqual([1, 1]);
    const gateways = async () => {
      const ps = await gatewayExec(handles[0]!.pod as string, ["ps", "-eo", "args"]);
      return ps.split("\n").filter((line) => line.startsWith("node /run/berth/berth-gateway.cjs")).length;
    };
    expect(await gateways()).toBe(1);

    // The gateway dies; every process attaches at once and restarts it: they settle on one instance.
    await gatewayExec(handles[0]!.pod as string, ["sh", "-c", "kill -9 $(cat /run/berth/gateway.pid)"]);
    const attached = await Promise.all(processes.map((process) => process.attach(spec)));
    const connectors = await Promise.all(
      attached.map(async (backend, index) => processes[index]!.connectMcp!(backend)),
    );
    expect(connectors).toHaveLength(4);
    expect(await gateways()).toBe(1);
    const results = await Promise.all(attached.map((backend) => backend.exec(["echo", "ok"])));
    expect(results.map((result) => result.stdout.toString())).toEqual(["ok\n", "ok\n", "ok\n", "ok\n"]);
    await Promise.all(attached.map((backend) => backend.close()));
  });

  it("connects in-cluster with the Pod's service account files, and reports refused credentials", async () => {
    const serviceAccountDir = await fs.mkdtemp(path.join(os.tmpdir(), "berth-sa-"));
    try {
      await fs.writeFile(path.join(serviceAccountDir, "token"), bed.emulator.token);
      await fs.writeFile(path.join(serviceAccountDir, "ca.crt"), bed.emulator.caCert!);
      await fs.writeFile(path.join(serviceAccountDir, "namespace"), bed.namespace);
      const port = Number(new URL(bed.emulator.url).port);
      const inCluster = bed.newDriver({
        connection: { source: "in-cluster", host: "127.0.0.1", port, serviceAccountDir },
      });
      // A provision through it: REST reads and the gateway's health over an exec WebSocket, with its token.
      expect((await provision(inCluster, shared)).steps).toContain("gateway.ready");
      expect((await inCluster.listResources()).map((resource) => resource.workspaceId)).toContain(
        shared.workspaceId,
      );
      // The tokenFile provider re-reads the file (rotated projected tokens); a revoked token is refused.
      await fs.writeFile(path.join(serviceAccountDir, "token"), "revoked");
      const refused = bed.newDriver({
        connection: { source: "in-cluster", host: "127.0.0.1", port, serviceAccountDir },
      });
      expect((await failureOf(refused.listResources())).code).toBe("UNAUTHORIZED");
    } finally {
      await fs.rm(serviceAccountDir, { recursive: true, force: true });
    }
  });

  // Last: it reaps the shared workspace.
  it("lists its resources by label and reaps an orphan completely", async () => {
    const spec = shared;
    await provision(driver, spec);
    const orphan = (await driver.listResources()).find(
      (resource) => resource.workspaceId === spec.workspaceId,
    );
    expect(orphan).toMatchObject({ tenantId: spec.tenantId });
    await driver.reap(orphan!);
    expect(await driver.exists(spec)).toBe(false);
    const secrets = await bed.core.listNamespacedSecret({
      namespace: bed.namespace,
      labelSelector: "berth.dev/workspace-key",
    });
    expect(secrets.items.filter((secret) => secret.metadata?.name?.includes(spec.workspaceId))).toHaveLength(
      0,
    );
    await expect(
      driver.reap({ workspaceId: null, tenantId: null, locator: "kube-system/coredns" }),
    ).rejects.toThrow(/refusing to reap/);
  });
});

describeKube("Kubernetes driver on an API server older than 1.30 (exec subprotocol v4 only)", () => {
  let bed: DriverTestbed;
  let driver: WorkspaceDriver;
  let spec: WorkspaceSpec;

  beforeAll(async () => {
    bed = await createDriverTestbed({ execProtocols: ["v4.channel.k8s.io"] });
    driver = bed.newDriver();
    spec = bed.specFor();
  });
  afterAll(async () => {
    await bed?.cleanup();
  });

  describe("without the CLOSE frame, stdin still reaches EOF (framed through the image's Node)", () => {
    it("provisions (the gateway bundle and token go in over stdin) and runs stdin-fed commands", async () => {
      const { steps, handle } = await provision(driver, spec);
      expect(steps).toContain("gateway.ready");
      // The server really refuses v5: client-node's own Exec ends up on v4.
      const probe = await new k8s.Exec(bed.kc).exec(
        bed.namespace,
        handle.pod as string,
        "workspace",
        ["true"],
        new PassThrough(),
        null,
        null,
        false,
      );
      expect(probe.protocol).toBe("v4.channel.k8s.io");
      probe.close();
      const backend = await driver.attach(spec);
      const payload = randomBytes(2 * 1024 * 1024);
      const hashed = await backend.exec(["sha256sum"], { stdin: Readable.from([payload]) });
      expect(hashed.stdout.toString().split(" ")[0]).toBe(createHash("sha256").update(payload).digest("hex"));
      await backend.writeFile("v4.txt", "written over v4");
      expect(await text(await backend.readFile("v4.txt"))).toBe("written over v4");
      const timed = await backend.exec(["sh", "-c", "sleep 300"], { timeoutMs: 500 });
      expect(timed).toMatchObject({ timedOut: true, exitCode: -1 });
      await backend.close();
    });
  });
});
