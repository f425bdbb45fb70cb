/**
 * Two Berth installations in one namespace whose workspaces have the same names (the same tenant, user and
 * workspace ids: a database restored into a second installation, say). The second never reattaches to, stops,
 * purges, lists or reaps the first one's Pod and claim: provision, stop and purge are refused with CONFLICT
 * and reap finds nothing of its own, so the first keeps the same objects, files and gateway credentials.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import type { WorkspaceDriver, WorkspaceSpec } from "@/server/workspace/drivers/driver";
import { createDriverTestbed, describeKube, type DriverTestbed } from "./support/kube-env";

async function failureOf(promise: Promise<unknown>): Promise<{ code?: string; message?: string }> {
  return promise.then(
    () => ({ code: "RESOLVED" }),
    (error: { code?: string; message?: string }) => error,
  );
}

describeKube("Kubernetes objects of two installations under the same names", () => {
  let bed: DriverTestbed;
  let first: WorkspaceDriver;
  let second: WorkspaceDriver;
  let spec: WorkspaceSpec;

  beforeAll(async () => {
    bed = await createDriverTestbed();
    first = bed.newDriver();
    second = bed.newDriver({}, "another-installation");
    spec = bed.specFor();
  });
  afterAll(async () => {
    await bed?.cleanup();
  });

  it("the second installation is refused and the first one's Pod, claim, files and credentials stay", async () => {
    const handle = await first.create(spec);
    const backend = await first.attach(spec);
    await backend.writeFile("mine.txt", "first installation");
    await backend.close();
    const pod = handle.pod as string;
    const uids = async () => ({
      pod: (await bed.core.readNamespacedPod({ namespace: bed.namespace, name: pod })).metadata?.uid,
      claim: (
        await bed.core.readNamespacedPersistentVolumeClaim({ namespace: bed.namespace, name: `${pod}-data` })
      ).metadata?.uid,
      secret: (await bed.core.readNamespacedSecret({ namespace: bed.namespace, name: `${pod}-gateway` }))
        .metadata?.uid,
    });
    const before = await uids();

    const attempts = [() => second.create(spec), () => second.stop(spec), () => second.purge(spec)];
    for (const attempt of attempts) {
      const failure = await failureOf(attempt());
      expect(failure.code).toBe("CONFLICT");
      expect(failure.message).toContain("belongs to another Berth installation (test-kubernetes)");
    }
    expect(await second.listResources()).toEqual([]);
    await second.reap({
      workspaceId: spec.workspaceId,
      tenantId: spec.tenantId,
      locator: `${bed.namespace}/${pod}`,
    });

    expect(await uids()).toEqual(before);
    expect((await first.listResources()).map((resource) => resource.workspaceId)).toEqual([spec.workspaceId]);
    const again = await first.attach(spec);
    expect((await again.exec(["cat", "mine.txt"])).stdout.toString()).toBe("first installation");
    await again.close();
  });
});
