import { Readable } from "node:stream";
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import Docker from "dockerode";
import { afterAll, beforeAll, expect, it, vi } from "vitest";
import type { ApiRuntime } from "@/server/api/context";
import { getDb } from "@/server/db";
import { cliOperatorActor } from "@/server/modules/operator/operator-actor";
import { countTenantRows, tenantOwnedTables } from "@/server/modules/operator/tenant-deletion.data";
import { requestTenantDeletion } from "@/server/modules/operator/tenant-lifecycle.service";
import { containerName } from "@/server/workspace/drivers/docker/docker-config";
import { describeDocker, SOCKET_PATH } from "../../drivers/docker/support/docker-env";
import { createTestApiRuntime } from "../api/support/api-test-runtime";
import { createTenantFixture, type TenantFixture } from "../api/support/tenant-fixtures";
import { dockerTestDriver, startE2bTestBackend, startKubeTestBackend } from "../workspace/backend-drivers";
import { freshSession, startWorkspaceHarness, type WorkspaceHarness } from "../workspace/harness";
import { callerWith, installProcessQueues, refusal } from "./support";
import { processBerth } from "@/server/composition/process-berth";

/**
 * Deleting a tenant (issue 15): the `tenant.delete` job purges every workspace on its own backend (a
 * bubblewrap folder, a Docker container, an E2B sandbox and a Kubernetes Pod with its claim, side by side,
 * the last two on their loopback emulators), deletes every row that names the tenant
 * (tables found by their tenant_id column) and the accounts that belonged to it alone, and leaves a
 * receipt that outlives it. Real Postgres, Redis, in-process workers, bubblewrap and Docker; the official
 * E2B and Kubernetes SDKs unmodified.
 */
// Four provisions (two of them through emulators) and their purges, one after the other.
describeDocker("a deleted tenant leaves no workspace, no rows and a receipt", { timeout: 180_000 }, () => {
  let h: WorkspaceHarness;
  let runtime: ApiRuntime;
  let t: TenantFixture;
  let kept: TenantFixture;
  let uninstall: () => Promise<void>;
  let e2b: Awaited<ReturnType<typeof startE2bTestBackend>>;
  let kube: Awaited<ReturnType<typeof startKubeTestBackend>>;
  const docker = new Docker({ socketPath: SOCKET_PATH });
  const runtimeRoot = path.join("/tmp", `berth-td-${randomBytes(3).toString("hex")}`);

  beforeAll(async () => {
    [e2b, kube] = await Promise.all([startE2bTestBackend(), startKubeTestBackend()]);
    h = await startWorkspaceHarness(
      { backends: ["local", "docker", "e2b", "kubernetes"] },
      { moreDrivers: (basedir) => [dockerTestDriver(basedir, runtimeRoot), e2b.driver, kube.driver] },
    );
    uninstall = await installProcessQueues(h.queues);
    runtime = createTestApiRuntime();
    t = await createTenantFixture(runtime, "del");
    kept = await createTenantFixture(runtime, "kept");
  });
  afterAll(async () => {
    await uninstall?.();
    await h?.close();
    await Promise.allSettled([e2b?.close(), kube?.close()]);
    await fs.rm(runtimeRoot, { recursive: true, force: true });
  });

  it("purges its local, Docker, E2B and Kubernetes workspaces, deletes its rows and users, and writes the receipt", async () => {
    const onLocal = await freshSession(t.ownerScope);
    const onDocker = await freshSession(t.ownerScope, "PER_AGENT", { backend: "docker" });
    const onE2b = await freshSession(t.ownerScope, "PER_AGENT", { backend: "e2b" });
    const onKube = await freshSession(t.ownerScope, "PER_AGENT", { backend: "kubernetes" });
    const [local, container, sandbox, pod] = await Promise.all(
      [onLocal, onDocker, onE2b, onKube].map((s) => h.service.resolveForSession(t.ownerScope, s.session.id)),
    );
    expect(sandbox!.workspace.kind).toBe("e2b");
    expect(pod!.workspace.kind).toBe("kubernetes");
    // The E2B sandbox the provision stored as its handle, and the Pod and claim in the emulator's namespace.
    const sandboxId = (
      (await getDb().workspace.findUnique({ where: { id: onE2b.workspaceId } }))?.backendHandle as {
        sandboxId: string;
      }
    ).sandboxId;
    expect(e2b.emulator.sandbox(sandboxId)).toBeDefined();
    const kubeObjects = async () => ({
      pods: (await kube.core.listNamespacedPod({ namespace: kube.namespace })).items.length,
      claims: (await kube.core.listNamespacedPersistentVolumeClaim({ namespace: kube.namespace })).items
        .length,
    });
    expect(await kubeObjects()).toEqual({ pods: 1, claims: 1 });
    await local!.workspace.machine.writeFile(path.posix.join(local!.workspace.workdir, "keep.txt"), "data");
    expect(container!.workspace.kind).toBe("docker");
    // The local backend's layout: <basedir>/<tenant>/…/<workspace id>.
    const tenantDir = path.join(h.basedir, t.tenant.id);
    const entries = await fs.readdir(tenantDir, { recursive: true });
    expect(entries.some((entry) => entry.endsWith(onLocal.workspaceId))).toBe(true);
    const name = containerName({
      tenantId: t.tenant.id,
      userId: t.owner.id,
      workspaceId: onDocker.workspaceId,
    });
    expect((await docker.getContainer(name).inspect()).State.Running).toBe(true);
    // A turn checkpoint's object in the installation's store.
    const stored = await h.engine.checkpoints.putBlob(
      t.tenant.id,
      Readable.from([Buffer.from("turn files")]),
    );
    const keptRows = await countTenantRows(kept.tenant.id, processBerth().db);
    const before = await countTenantRows(t.tenant.id, processBerth().db);
    expect(before).toMatchObject({ workspaces: 4, sessions: 4, agents: 4, memberships: 2 });

    const { jobId } = await requestTenantDeletion(
      cliOperatorActor(),
      { tenantId: t.tenant.id },
      processBerth().queues,
      processBerth().db,
    );
    expect(jobId).toBe(`tenant.delete__${t.tenant.id}`);
    // From the request on, the tenant is refused like a suspended one.
    expect(
      await refusal(
        callerWith(runtime, { cookie: t.owner.cookie }).tenant.overview({ tenantId: t.tenant.id }),
      ),
    ).toMatchObject({ code: expect.stringMatching(/FORBIDDEN|UNAUTHORIZED/) });

    const receipt = await vi.waitFor(
      async () => {
        const row = await getDb().tenantDeletionReceipt.findUnique({ where: { tenantId: t.tenant.id } });
        expect(row).not.toBeNull();
        return row!;
      },
      { timeout: 90_000, interval: 250 },
    );

    // No workspace: the sandbox folder and the container are gone.
    const left = await fs.readdir(tenantDir, { recursive: true }).catch(() => [] as string[]);
    expect(left.filter((entry) => entry.includes(onLocal.workspaceId))).toEqual([]);
    await expect(docker.getContainer(name).inspect()).rejects.toMatchObject({ statusCode: 404 });
    expect(e2b.emulator.sandbox(sandboxId)).toBeUndefined();
    expect(await kubeObjects()).toEqual({ pods: 0, claims: 0 });
    await expect(h.engine.checkpoints.readBlob(t.tenant.id, stored.hash)).rejects.toMatchObject({
      code: "NOT_FOUND",
    });
    // No rows in any table that names a tenant, and the tenant's own accounts went with it.
    for (const table of await tenantOwnedTables(processBerth().db)) {
      const rows = await getDb().$queryRawUnsafe<{ n: bigint }[]>(
        `SELECT count(*) AS n FROM "${table}" WHERE tenant_id = $1`,
        t.tenant.id,
      );
      expect(Number(rows[0]!.n), table).toBe(0);
    }
    expect(await getDb().tenant.findUnique({ where: { id: t.tenant.id } })).toBeNull();
    expect(await getDb().user.count({ where: { id: { in: [t.owner.id, t.viewer.id] } } })).toBe(0);
    expect(await getDb().apiKey.count({ where: { id: t.adminKey.id } })).toBe(0);
    // The receipt says what went: both workspaces with their purge receipts, and the row counts.
    const deleted = receipt.deleted as {
      workspaces: { workspaceId: string; outcome: string; receiptId: string | null }[];
      purgeReceipts: { targetId: string; deleted: { backend: string; inventoryError?: string } }[];
      databaseRows: Record<string, number>;
      users: number;
    };
    expect(receipt).toMatchObject({ tenantSlug: t.tenant.slug, actor: "cli" });
    expect(deleted.workspaces.map((w) => [w.workspaceId, w.outcome]).sort()).toEqual(
      [
        [onLocal.workspaceId, "purged"],
        [onDocker.workspaceId, "purged"],
        [onE2b.workspaceId, "purged"],
        [onKube.workspaceId, "purged"],
      ].sort(),
    );
    expect(deleted.purgeReceipts.map((r) => [r.targetId, r.deleted.backend]).sort()).toEqual(
      [
        [onLocal.workspaceId, "local"],
        [onDocker.workspaceId, "docker"],
        [onE2b.workspaceId, "e2b"],
        [onKube.workspaceId, "kubernetes"],
      ].sort(),
    );
    // Each machine was listed before it went (a Kubernetes Pod cannot be attached once stopped).
    expect(deleted.purgeReceipts.map((r) => r.deleted.inventoryError ?? null)).toEqual([
      null,
      null,
      null,
      null,
    ]);
    expect(deleted.databaseRows).toMatchObject({ workspaces: 4, sessions: 4, agents: 4, memberships: 2 });
    expect(deleted.users).toBe(2);
    // The key is gone: it no longer authenticates at all.
    expect(
      (
        await refusal(
          callerWith(runtime, { authorization: `Bearer ${t.adminKey.plainKey}` }).tenant.overview({}),
        )
      ).code,
    ).toBe("UNAUTHORIZED");
    // Another tenant is untouched; the operator audit has the request and the completion.
    expect(await countTenantRows(kept.tenant.id, processBerth().db)).toEqual(keptRows);
    const audit = await getDb().operatorAuditLog.findMany({
      where: { targetId: t.tenant.id },
      orderBy: { at: "asc" },
    });
    expect(audit.map((row) => [row.action, (row.details as { phase?: string }).phase])).toEqual([
      ["tenant.delete", "requested"],
      ["tenant.delete", "completed"],
    ]);
  });
});
