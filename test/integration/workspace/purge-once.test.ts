/**
 * One purge, one correct receipt, however the runs of a purge overlap or break off (the robustness issue:
 * a second worker ran the same purge while the first was still deleting, and its receipt said
 * `dataFiles 0, mcpDeclarations []` for a workspace that had 3 data files and 2 declarations). Real
 * Postgres, the bubblewrap driver's host folders; a run's machine is held or broken at a chosen point.
 */
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { processBerth } from "@/server/composition/process-berth";
import { getDb } from "@/server/db";
import { driverSetOf } from "@/server/engine/driver-set";
import { listPurgeReceipts } from "@/server/modules/audit/audit.data";
import { upsertWorkspaceBinding, getWorkspace } from "@/server/modules/workspace/workspace.data";
import {
  findWorkspaceRecordForSystem,
  transitionFrom,
} from "@/server/modules/workspace/workspace-lifecycle.data";
import { purgeWorkspace } from "@/server/modules/purge/workspace-purge.service";
import { specOfRecord } from "@/server/modules/workspace/workspace-spec";
import type { WorkspaceDriver } from "@/server/workspace/drivers/driver";
import { createTestTenant, type TestTenant } from "../db/fixtures";
import { sandboxDriver } from "../../drivers/local/support/sandbox-env";

const MCP_FILE = JSON.stringify({
  version: 2,
  mcps: {
    "agent-1": {
      "": [
        { name: "first", is_stateful: true, mcp_config: { type: "stdio_mcp", command: "true" } },
        { name: "second", is_stateful: true, mcp_config: { type: "stdio_mcp", command: "true" } },
      ],
    },
  },
});

describe("a workspace purge runs once and writes one correct receipt", () => {
  let basedir: string;
  let driver: WorkspaceDriver;
  let tenant: TestTenant;

  beforeAll(async () => {
    basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-purge-once-")));
    await fs.chmod(basedir, 0o711);
    driver = sandboxDriver(basedir);
    tenant = await createTestTenant();
  });
  afterAll(async () => {
    await fs.rm(basedir, { recursive: true, force: true });
  });

  /** A READY workspace holding 3 data files, 2 MCP declarations and `files` more files; its folder. */
  async function readyWorkspace(files = 200): Promise<{ workspaceId: string; folder: string }> {
    const workspaceId = `purge-once-${randomBytes(4).toString("hex")}`;
    await upsertWorkspaceBinding(
      tenant.scope,
      {
        id: workspaceId,
        backendKind: "local",
        isolationPolicy: "PER_AGENT",
      },
      { config: processBerth().config.quotas },
      getDb(),
    );
    const record = (await findWorkspaceRecordForSystem(workspaceId, getDb()))!;
    const handle = await driver.create(specOfRecord(record));
    await transitionFrom(
      tenant.scope,
      workspaceId,
      {
        from: ["PENDING"],
        to: "PROVISIONING",
        reason: "test",
      },
      getDb(),
    );
    await transitionFrom(
      tenant.scope,
      workspaceId,
      {
        from: ["PROVISIONING"],
        to: "READY",
        reason: "test",
        backendHandle: handle,
      },
      getDb(),
    );
    const folder = handle.folder as string;
    await fs.writeFile(path.join(folder, ".mcp"), MCP_FILE);
    await fs.mkdir(path.join(folder, "data"), { recursive: true });
    for (const name of ["a", "b", "c"]) await fs.writeFile(path.join(folder, "data", name), name);
    await fs.mkdir(path.join(folder, "project", "src"), { recursive: true });
    for (let i = 0; i < files; i++) await fs.writeFile(path.join(folder, "project", "src", `f${i}`), "");
    return { workspaceId, folder };
  }

  /** The driver with its purge replaced for one run (the rest is the real driver). */
  function withPurge(purge: WorkspaceDriver["purge"]) {
    return { db: getDb(), drivers: driverSetOf([{ ...driver, purge }]), lifecycle: processBerth().lifecycle };
  }

  const payload = (workspaceId: string) => ({
    tenantId: tenant.tenantId,
    workspaceId,
    reason: "purge requested",
    actor: "test",
  });
  const receipts = (workspaceId: string) =>
    listPurgeReceipts(tenant.scope, { targetType: "workspace", targetId: workspaceId }, getDb());
  const expectOneCorrectReceipt = async (workspaceId: string) => {
    const found = await receipts(workspaceId);
    expect(found).toHaveLength(1);
    expect(found[0]!.deleted).toMatchObject({
      dataFiles: 3,
      mcpDeclarations: ["agent-1/-/first", "agent-1/-/second"],
      generation: 1,
    });
  };

  it("a run that breaks off after deleting the data files is finished by the next, with the first inventory", async () => {
    const { workspaceId, folder } = await readyWorkspace();
    // The first run's worker dies after deleting part of the folder (the data files among it).
    const dying = withPurge(async () => {
      await fs.rm(path.join(folder, "data"), { recursive: true });
      throw new Error("worker died mid-purge");
    });
    await expect(purgeWorkspace(dying, payload(workspaceId))).rejects.toThrow(/died/);
    expect((await getWorkspace(tenant.scope, workspaceId, getDb())).state).toBe("PURGING");
    expect(await receipts(workspaceId)).toEqual([]);

    const result = await purgeWorkspace(
      { db: getDb(), drivers: driverSetOf([driver]), lifecycle: processBerth().lifecycle },
      payload(workspaceId),
    );
    expect(result.outcome).toBe("purged");
    await expect(fs.stat(folder)).rejects.toThrow(/ENOENT/);
    await expectOneCorrectReceipt(workspaceId);
    expect(await getDb().workspace.findUnique({ where: { id: workspaceId } })).toMatchObject({
      state: "PURGED",
      purgeHolder: null,
      purgeInventory: null,
    });
  });

  it("a second run while the first deletes waits for it; one deletion, one receipt", async () => {
    const { workspaceId, folder } = await readyWorkspace();
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let entered!: () => void;
    const deleting = new Promise<void>((resolve) => (entered = resolve));
    const slow = withPurge(async (spec, options) => {
      entered();
      await held;
      return driver.purge(spec, options);
    });
    const first = purgeWorkspace(slow, payload(workspaceId));
    await deleting;
    // The same job picked up by a second worker (its lock lapsed): it must not delete or write a receipt.
    await expect(
      purgeWorkspace(
        { db: getDb(), drivers: driverSetOf([driver]), lifecycle: processBerth().lifecycle },
        payload(workspaceId),
      ),
    ).rejects.toMatchObject({
      code: "UNAVAILABLE",
    });
    await expect(fs.stat(path.join(folder, "data", "a"))).resolves.toBeTruthy();
    release();
    expect((await first).outcome).toBe("purged");
    await expectOneCorrectReceipt(workspaceId);
    // Its retry finds the work done.
    expect(
      (
        await purgeWorkspace(
          { db: getDb(), drivers: driverSetOf([driver]), lifecycle: processBerth().lifecycle },
          payload(workspaceId),
        )
      ).outcome,
    ).toBe("already-purged");
    await expectOneCorrectReceipt(workspaceId);
  });

  it("a run whose claim lapsed and was taken over cannot end the generation a second time", async () => {
    const { workspaceId } = await readyWorkspace();
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let entered!: () => void;
    const deleting = new Promise<void>((resolve) => (entered = resolve));
    const stalled = withPurge(async (spec, options) => {
      entered();
      await held;
      return driver.purge(spec, options);
    });
    const first = purgeWorkspace(stalled, payload(workspaceId));
    await deleting;
    // The first run stalled past its claim: another takes over and finishes.
    await getDb().workspace.update({ where: { id: workspaceId }, data: { purgeHeldUntil: new Date(0) } });
    expect(
      (
        await purgeWorkspace(
          { db: getDb(), drivers: driverSetOf([driver]), lifecycle: processBerth().lifecycle },
          payload(workspaceId),
        )
      ).outcome,
    ).toBe("purged");
    release();
    await expect(first).rejects.toMatchObject({ code: "UNAVAILABLE" });
    await expectOneCorrectReceipt(workspaceId);
  });
});
