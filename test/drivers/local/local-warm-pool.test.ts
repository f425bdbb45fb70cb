import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { AppError } from "@/server/shared/errors";
import {
  instantiateDriver,
  type WorkspaceDriver,
  type WorkspaceSpec,
} from "@/server/workspace/drivers/driver";
import { hostUnconfinedDriver } from "@/server/workspace/drivers/host-unconfined/driver";
import { sandboxIdentity, sandboxKey } from "@/server/workspace/drivers/bubblewrap/sandbox-args";
import { ZSandboxConfig } from "@/server/workspace/drivers/bubblewrap/sandbox-config";
import { describeSandbox, sandboxDriver, specOf, TEST_SANDBOX } from "./support/sandbox-env";

const uidOf = (spec: WorkspaceSpec) =>
  sandboxIdentity(ZSandboxConfig.parse(TEST_SANDBOX), sandboxKey(spec)).uid;

async function rejection(promise: Promise<unknown>): Promise<AppError> {
  const error = await promise.then(
    () => null,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(AppError);
  return error as AppError;
}

/**
 * Warm pools of the `local` driver: identity-free folders under `<basedir>/.pool/local/<id>`, bound to a
 * workspace by a rename and a chown. Real bubblewrap, real folders, no mocks.
 */
describeSandbox("local driver: warm pool", () => {
  let basedir: string;
  let driver: WorkspaceDriver;
  const bound: WorkspaceSpec[] = [];

  /** Creates `poolId` and binds it to `spec`; returns the spec with its stored handle. */
  async function claim(poolId: string, spec: WorkspaceSpec): Promise<WorkspaceSpec> {
    const idle = await driver.createIdleMachine!(poolId);
    const handle = await driver.bindIdleMachine!(poolId, idle, spec);
    const stored = { ...spec, handle };
    bound.push(stored);
    return stored;
  }

  beforeAll(async () => {
    basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-local-pool-")));
    driver = sandboxDriver(basedir);
  });

  afterAll(async () => {
    for (const spec of bound) await driver.stop(spec);
    await fs.rm(basedir, { recursive: true, force: true });
  });

  it("states the capability and a stable key that follows the sandbox settings", async () => {
    expect(driver.capabilities.warmPool).toBe(true);
    const key = await driver.warmPoolKey!();
    expect(key).toMatch(/^[0-9a-f]{16}$/);
    expect(await sandboxDriver(basedir).warmPoolKey!()).toBe(key);
    const other = sandboxDriver(basedir, { sandbox: { memoryLimitBytes: 64 * 1024 * 1024 } });
    expect(await other.warmPoolKey!()).not.toBe(key);
  });

  it("creates an idle machine once per id, listed as idle and never as a workspace", async () => {
    const first = await driver.createIdleMachine!("pool-idem");
    const again = await driver.createIdleMachine!("pool-idem");
    const folder = path.join(basedir, ".pool", "local", "pool-idem");
    expect(first).toEqual({ folder, pool: "pool-idem" });
    expect(again).toEqual(first);
    const info = await fs.stat(folder);
    expect(info.mode & 0o777).toBe(0o700);
    expect(await fs.readdir(folder)).toEqual([]);
    expect(await driver.listIdleMachines!()).toContain("pool-idem");
    const locators = (await driver.listResources()).map((resource) => resource.locator);
    expect(locators.filter((locator) => locator.includes(`${path.sep}.pool`))).toEqual([]);
    // Reconcile's orphan reaping cannot be pointed at it either.
    await expect(driver.reap({ workspaceId: null, tenantId: null, locator: folder })).rejects.toThrow(
      /refusing to reap/,
    );
    expect(await fs.stat(folder).then((s) => s.isDirectory())).toBe(true);
  });

  it("keeps a tenant named `.pool` out of the pools, and the pools out of its workspaces", async () => {
    const spec = specOf("ws-dot-tenant", { tenantId: ".pool" });
    await driver.create(spec);
    bound.push(spec);
    const resource = (await driver.listResources()).find((r) => r.workspaceId === "ws-dot-tenant");
    expect(resource).toMatchObject({ tenantId: ".pool" });
    expect(resource!.locator.startsWith(path.join(basedir, "%2Epool"))).toBe(true);
    expect(await driver.listIdleMachines!()).not.toContain("ws-dot-tenant");
  });

  it("binds a pooled folder: the workspace's uid, its files, exists, usage and listResources", async () => {
    const spec = await claim("pool-bind", specOf("ws-bound"));
    expect(spec.handle).toEqual({ folder: path.join(basedir, "tenant-a", "user-a", "ws-bound") });
    expect(await driver.listIdleMachines!()).not.toContain("pool-bind");

    const machine = await driver.attach(spec);
    try {
      const id = await machine.exec(["id", "-u"]);
      expect(id.exitCode).toBe(0);
      expect(Number(id.stdout.toString().trim())).toBe(uidOf(spec));
      await machine.writeFile("/workspace/notes.txt", "from the tools");
      const shell = await machine.exec(["/bin/sh", "-c", "cat notes.txt && echo from-shell > shell.txt"]);
      expect(shell.stdout.toString()).toBe("from the tools");
      const read = await machine.readFile("/workspace/shell.txt");
      expect(Buffer.concat(await read.toArray()).toString()).toBe("from-shell\n");
    } finally {
      await driver.detach(machine);
    }

    expect(await driver.exists(spec)).toBe(true);
    const usage = await driver.usage!(spec);
    expect(usage?.diskBytes).toBeGreaterThan(0);
    expect(await driver.listResources()).toContainEqual({
      workspaceId: "ws-bound",
      tenantId: "tenant-a",
      locator: path.join(basedir, "tenant-a", "user-a", "ws-bound"),
    });
    // Discarding the id again (a pool's late cleanup) never reaches the bound workspace.
    await driver.discardIdleMachine!("pool-bind", null);
    expect(await driver.exists(spec)).toBe(true);
  });

  it("refuses to bind onto a workspace that has a folder, and leaves the pool folder intact", async () => {
    const existing = specOf("ws-existing");
    await driver.create(existing);
    bound.push(existing);
    const idle = await driver.createIdleMachine!("pool-conflict");
    const error = await rejection(driver.bindIdleMachine!("pool-conflict", idle, existing));
    expect(error.code).toBe("CONFLICT");
    expect(await driver.listIdleMachines!()).toContain("pool-conflict");
    expect(await fs.readdir(path.join(basedir, ".pool", "local", "pool-conflict"))).toEqual([]);
    // The existing (empty) folder was not replaced by the pool's.
    expect((await fs.stat(path.join(basedir, "tenant-a", "user-a", "ws-existing"))).uid).toBe(
      uidOf(existing),
    );
  });

  it("reports a pool machine that is gone as NOT_FOUND, leaving no workspace folder behind", async () => {
    const spec = specOf("ws-from-gone");
    const error = await rejection(
      driver.bindIdleMachine!("pool-never-made", { folder: "x", pool: "pool-never-made" }, spec),
    );
    expect(error.code).toBe("NOT_FOUND");
    expect(await driver.exists(spec)).toBe(false);
  });

  it("discards idle machines idempotently, and refuses ids that are not one plain segment", async () => {
    await driver.createIdleMachine!("pool-discard");
    await fs.writeFile(path.join(basedir, ".pool", "local", "pool-discard", "left-over"), "x");
    await driver.discardIdleMachine!("pool-discard", null);
    await driver.discardIdleMachine!("pool-discard", null);
    expect(await driver.listIdleMachines!()).not.toContain("pool-discard");
    await expect(fs.stat(path.join(basedir, ".pool", "local", "pool-discard"))).rejects.toThrow(/ENOENT/);
    for (const id of ["../tenant-a", "a/b", "", ".."]) {
      expect((await rejection(driver.discardIdleMachine!(id, null))).code).toBe("BAD_REQUEST");
      expect((await rejection(driver.createIdleMachine!(id))).code).toBe("BAD_REQUEST");
    }
    expect(await driver.exists(specOf("ws-bound"))).toBe(true);
  });

  it("keeps two pooled machines bound to two tenants apart", async () => {
    const mine = await claim("pool-mine", specOf("ws-pool-mine"));
    const theirs = await claim("pool-theirs", specOf("ws-pool-theirs", { tenantId: "tenant-b" }));
    const a = await driver.attach(mine);
    const b = await driver.attach(theirs);
    try {
      await b.writeFile("/workspace/secret.txt", "tenant b's secret");
      const look = await a.exec([
        "/bin/sh",
        "-c",
        `ls -A /workspace; cat ${path.join(basedir, "tenant-b", "user-a", "ws-pool-theirs", "secret.txt")} 2>&1`,
      ]);
      // Its own folder is empty, and the other tenant's host path is not even there in its sandbox.
      expect(look.stdout.toString()).toMatch(/^cat: .*secret\.txt: No such file or directory\n$/);
      expect(await a.stat("/workspace/secret.txt")).toBeNull();
      if (process.getuid?.() === 0) expect(uidOf(mine)).not.toBe(uidOf(theirs));
    } finally {
      await driver.detach(a);
      await driver.detach(b);
    }
  });

  it("gives host-unconfined the same pool over the same folders", async () => {
    const context = { basedir, cwd: process.cwd(), uid: process.getuid?.() ?? -1 };
    const unconfined = instantiateDriver(hostUnconfinedDriver, { env: {} }, context);
    expect(unconfined.capabilities.warmPool).toBe(true);
    expect(await unconfined.warmPoolKey!()).not.toBe(await driver.warmPoolKey!());
    const idle = await unconfined.createIdleMachine!("pool-unconfined");
    const spec = specOf("ws-unconfined");
    const handle = await unconfined.bindIdleMachine!("pool-unconfined", idle, spec);
    const machine = await unconfined.attach({ ...spec, handle });
    try {
      const pwd = await machine.exec(["pwd"]);
      expect(pwd.stdout.toString().trim()).toBe(path.join(basedir, "tenant-a", "user-a", "ws-unconfined"));
    } finally {
      await unconfined.detach(machine);
    }
    expect(await unconfined.listIdleMachines!()).not.toContain("pool-unconfined");
  });
});
