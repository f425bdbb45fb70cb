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
import { containerName } from "@/server/workspace/backends/docker/docker-config";
import { dockerDriver } from "@/server/workspace/backends/docker/driver";
import { BASE_IMAGE, describeDocker, SOCKET_PATH, testInstallationId } from "../../docker/support/docker-env";
import { createTestApiRuntime } from "../api/support/api-test-runtime";
import { createTenantFixture, type TenantFixture } from "../api/support/tenant-fixtures";
import { freshSession, startWorkspaceHarness, type WorkspaceHarness } from "../workspace/harness";
import { callerWith, installProcessQueues, refusal } from "./support";

/**
 * Deleting a tenant (issue 15): the `tenant.delete` job purges every workspace on its own backend (a
 * bubblewrap folder and a Docker container here, side by side), deletes every row that names the tenant
 * (tables found by their tenant_id column) and the accounts that belonged to it alone, and leaves a
 * receipt that outlives it. Real Postgres, Redis, in-process workers, bubblewrap and Docker.
 */
describeDocker("a deleted tenant leaves no workspace, no rows and a receipt", () => {
  let h: WorkspaceHarness;
  let runtime: ApiRuntime;
  let t: TenantFixture;
  let kept: TenantFixture;
  let uninstall: () => void;
  const docker = new Docker({ socketPath: SOCKET_PATH });
  const runtimeRoot = path.join("/tmp", `berth-td-${randomBytes(3).toString("hex")}`);

  beforeAll(async () => {
    h = await startWorkspaceHarness(
      { backends: ["local", "docker"] },
      {
        moreDrivers: (basedir) => [
          dockerDriver.create(
            dockerDriver.configSchema.parse({
              dataRoot: basedir,
              socketPath: SOCKET_PATH,
              baseImage: BASE_IMAGE,
              runtimeRoot,
              memoryBytes: 512 * 1024 * 1024,
              stopTimeoutSeconds: 1,
            }),
            {
              basedir,
              cwd: process.cwd(),
              uid: process.getuid?.() ?? -1,
              installationId: testInstallationId,
            },
          ),
        ],
      },
    );
    uninstall = installProcessQueues(h.queues);
    runtime = createTestApiRuntime();
    t = await createTenantFixture(runtime, "del");
    kept = await createTenantFixture(runtime, "kept");
  });
  afterAll(async () => {
    uninstall?.();
    await h?.close();
    await fs.rm(runtimeRoot, { recursive: true, force: true });
  });

  it("purges its local and Docker workspaces, deletes its rows and users, and writes the receipt", async () => {
    const onLocal = await freshSession(t.ownerScope);
    const onDocker = await freshSession(t.ownerScope, "PER_AGENT", { backend: "docker" });
    const local = await h.service.resolveForSession(t.ownerScope, onLocal.session.id);
    const container = await h.service.resolveForSession(t.ownerScope, onDocker.session.id);
    await local.workspace.backend.writeFile(path.posix.join(local.workspace.workdir, "keep.txt"), "data");
    expect(container.workspace.backend.kind).toBe("docker");
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
    const keptRows = await countTenantRows(kept.tenant.id);
    const before = await countTenantRows(t.tenant.id);
    expect(before).toMatchObject({ workspaces: 2, sessions: 2, agents: 2, memberships: 2 });

    const { jobId } = await requestTenantDeletion(cliOperatorActor(), { tenantId: t.tenant.id });
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
    // No rows in any table that names a tenant, and the tenant's own accounts went with it.
    for (const table of await tenantOwnedTables()) {
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
      purgeReceipts: { targetId: string; deleted: { backend: string } }[];
      databaseRows: Record<string, number>;
      users: number;
    };
    expect(receipt).toMatchObject({ tenantSlug: t.tenant.slug, actor: "cli" });
    expect(deleted.workspaces.map((w) => [w.workspaceId, w.outcome]).sort()).toEqual(
      [
        [onLocal.workspaceId, "purged"],
        [onDocker.workspaceId, "purged"],
      ].sort(),
    );
    expect(deleted.purgeReceipts.map((r) => [r.targetId, r.deleted.backend]).sort()).toEqual(
      [
        [onLocal.workspaceId, "local"],
        [onDocker.workspaceId, "docker"],
      ].sort(),
    );
    expect(deleted.databaseRows).toMatchObject({ workspaces: 2, sessions: 2, agents: 2, memberships: 2 });
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
    expect(await countTenantRows(kept.tenant.id)).toEqual(keptRows);
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
