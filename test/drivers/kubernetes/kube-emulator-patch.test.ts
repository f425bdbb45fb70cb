/**
 * The emulator's PATCH as the warm pool's bind relies on it (client-node's merge patch, as a real API
 * server takes it): labels merged key by key (null removes one), and a resourceVersion the patch carries is
 * a precondition. No Pod is started: claims are enough.
 */
import * as k8s from "@kubernetes/client-node";
import { afterAll, beforeAll, expect, it } from "vitest";
import { describeKube, eventually, startEmulatorWithClients } from "./support/kube-env";

/** The HTTP status and the Status reason of a call that must fail. */
async function failureOf(promise: Promise<unknown>) {
  const error = (await promise.then(
    () => null,
    (caught: unknown) => caught,
  )) as k8s.ApiException<string> | null;
  if (!error) throw new Error("expected the call to fail");
  return { code: error.code, body: JSON.parse(error.body) as { reason?: string } };
}

describeKube("kube emulator: conditional merge patches", () => {
  let cluster: Awaited<ReturnType<typeof startEmulatorWithClients>>;
  let core: k8s.CoreV1Api;
  let namespace: string;

  beforeAll(async () => {
    cluster = await startEmulatorWithClients();
    ({ core, namespace } = cluster);
  });
  afterAll(async () => {
    await cluster?.emulator.close();
  });

  it("merge-patches labels, with a resourceVersion in the patch as a precondition (409 once it moved on)", async () => {
    await core.createNamespacedPersistentVolumeClaim({
      namespace,
      body: {
        metadata: { name: "relabelled", labels: { state: "idle", keep: "yes" } },
        spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
      },
    });
    // Read once bound: binding is a write of its own (a new resourceVersion), as the PV controller's is.
    const claim = await eventually(async () => {
      const current = await core.readNamespacedPersistentVolumeClaim({ namespace, name: "relabelled" });
      return current.status?.phase === "Bound" ? current : undefined;
    });
    const merge = k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch);
    const read = claim.metadata!.resourceVersion!;
    const bound = await core.patchNamespacedPersistentVolumeClaim(
      {
        namespace,
        name: "relabelled",
        body: { metadata: { resourceVersion: read, labels: { state: "bound", keep: null } } },
      },
      merge,
    );
    expect(bound.metadata?.labels).toEqual({ state: "bound" });
    expect(bound.metadata?.resourceVersion).not.toBe(read);
    // A second writer that read the same version loses, as on a real API server.
    const stale = core.patchNamespacedPersistentVolumeClaim(
      {
        namespace,
        name: "relabelled",
        body: { metadata: { resourceVersion: read, labels: { state: "gone" } } },
      },
      merge,
    );
    expect(await failureOf(stale)).toMatchObject({ code: 409, body: { reason: "Conflict" } });
    // Without a resourceVersion a patch applies to whatever is current.
    const unconditional = await core.patchNamespacedPersistentVolumeClaim(
      { namespace, name: "relabelled", body: { metadata: { annotations: { note: "x" } } } },
      merge,
    );
    expect(unconditional.metadata).toMatchObject({ labels: { state: "bound" }, annotations: { note: "x" } });
    await core.deleteNamespacedPersistentVolumeClaim({ namespace, name: "relabelled" });
  });
});
