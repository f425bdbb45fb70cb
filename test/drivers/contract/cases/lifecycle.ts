import { expect } from "vitest";
import type { WorkspaceDriver, WorkspaceSpec } from "@/server/workspace/drivers/driver";
import type { ContractContext } from "../backend-contract";
import { pollUntil, textOf } from "../support";

/** Provisions as a worker does and attaches as the API does: the handle goes from one to the other. */
async function provisionAndAttach(driver: WorkspaceDriver, spec: WorkspaceSpec) {
  const handle = await driver.create(spec);
  const withHandle = { ...spec, handle };
  return { spec: withHandle, backend: await driver.attach(withHandle) };
}

const listed = async (driver: WorkspaceDriver, workspaceId: string) =>
  (await driver.listResources()).filter((resource) => resource.workspaceId === workspaceId);

/** Lifecycle, reattach after a restart, liveness and reconcile: the machine controller's side of the seam. */
export function registerLifecycleCases(context: ContractContext): void {
  context.it(
    "lifecycle: provision returns a JSON handle, attach, stop keeps data, re-provision, purge removes everything",
    async () => {
      const { driver } = context;
      const spec = context.newSpec("life");
      expect(await driver.exists(spec)).toBe(false);
      const handle = await driver.create(spec);
      // The handle is stored in a jsonb column: it must survive JSON unchanged.
      expect(JSON.parse(JSON.stringify(handle))).toEqual(handle);
      expect(JSON.stringify(handle)).not.toMatch(/token|secret|password/i);
      expect(await driver.exists(spec)).toBe(true);
      expect(await listed(driver, spec.workspaceId)).toHaveLength(1);

      const first = await driver.attach({ ...spec, handle });
      expect(first.workdir.startsWith("/")).toBe(true);
      await first.writeFile("kept/note.txt", "survives a stop");
      await first.close();

      await driver.stop({ ...spec, handle });
      expect(await driver.exists({ ...spec, handle })).toBe(true);
      const again = await driver.create({ ...spec, handle });
      const second = await driver.attach({ ...spec, handle: again });
      if (driver.persistent) {
        expect(await textOf(await second.readFile("kept/note.txt"))).toBe("survives a stop");
      }
      expect((await second.exec(["sh", "-c", "echo up"])).stdout.toString()).toBe("up\n");
      await second.close();

      const deleted = await driver.purge({ ...spec, handle: again });
      expect(deleted.length).toBeGreaterThan(0);
      expect(deleted.every((entry) => typeof entry === "string" && entry.length > 0)).toBe(true);
      expect(await driver.exists({ ...spec, handle: again })).toBe(false);
      expect(await listed(driver, spec.workspaceId)).toEqual([]);
      // Idempotent: a job retried after a crash purges again.
      await driver.purge({ ...spec, handle: again });
    },
  );

  context.it(
    "capabilities: the machine is what the driver says it is (host paths; the driver's facts stated once)",
    async () => {
      const { driver, backend } = context;
      // The facts are the driver's alone: the live machine repeats none of them.
      expect(backend).not.toHaveProperty("kind");
      expect(backend).not.toHaveProperty("isolated");
      expect(driver.name).toBe(context.name);
      expect(typeof driver.isolation.isolated).toBe("boolean");
      // `hostPaths` promises WorkspaceMachine.hostPath (bulk writers go direct through it).
      expect(typeof backend.hostPath === "function").toBe(driver.capabilities.hostPaths);
      if (backend.hostPath) {
        await backend.writeFile("caps/host.txt", "on the host");
        const fs = await import("node:fs/promises");
        expect(await fs.readFile(backend.hostPath("caps/host.txt"), "utf8")).toBe("on the host");
      }
    },
  );

  context.it(
    "reattach: a new driver instance (a restarted process) attaches with the stored handle and sees the data",
    async () => {
      const { spec, backend } = context;
      await backend.writeFile("reattach/state.txt", "from the first process");
      const restarted = context.freshDriver();
      const other = await restarted.attach(spec);
      try {
        expect(other.workdir).toBe(backend.workdir);
        expect(await textOf(await other.readFile("reattach/state.txt"))).toBe("from the first process");
        await other.writeFile("reattach/back.txt", "from the restart");
        expect(await textOf(await backend.readFile("reattach/back.txt"))).toBe("from the restart");
        expect((await other.exec(["cat", "reattach/state.txt"])).stdout.toString()).toBe(
          "from the first process",
        );
        expect(await restarted.isAlive(other)).toBe(true);
      } finally {
        // Letting go in one process leaves the machine running for the others.
        await (restarted.detach ? restarted.detach(other) : other.close());
      }
      expect(await context.driver.isAlive(backend)).toBe(true);
      expect((await backend.exec(["cat", "reattach/back.txt"])).stdout.toString()).toBe("from the restart");
    },
  );

  context.it(
    "liveness: false once another process stops or purges the machine (where it may vanish), back after re-provision",
    async () => {
      const { driver } = context;
      const worker = context.freshDriver();
      const attached = await provisionAndAttach(driver, context.newSpec("live"));
      await attached.backend.writeFile("alive.txt", "yes");
      expect(await driver.isAlive(attached.backend)).toBe(true);

      await worker.stop(attached.spec);
      if (driver.capabilities.mayVanish) {
        expect(
          await pollUntil(
            () => driver.isAlive(attached.backend),
            (alive) => !alive,
          ),
        ).toBe(false);
      } else {
        // Only Berth deletes such machines: a stopped one is still there to use.
        expect(await driver.isAlive(attached.backend)).toBe(true);
      }
      await attached.backend.close();

      const back = await provisionAndAttach(worker, attached.spec);
      const reattached = await driver.attach(back.spec);
      expect(await driver.isAlive(reattached)).toBe(true);
      expect(await textOf(await reattached.readFile("alive.txt"))).toBe("yes");
      await back.backend.close();

      await worker.purge(back.spec);
      if (driver.capabilities.mayVanish) {
        expect(
          await pollUntil(
            () => driver.isAlive(reattached),
            (alive) => !alive,
          ),
        ).toBe(false);
      }
      await reattached.close();
    },
  );

  context.it(
    "reconcile: a resource without a record is listed by listResources and reaped by reap",
    async () => {
      const { driver } = context;
      const orphan = context.newSpec("orphan");
      await driver.create(orphan);
      // The records this suite knows of: every workspace it made except the orphan.
      const records = new Set(
        context.created.filter((spec) => spec !== orphan).map((spec) => spec.workspaceId),
      );
      const ours = (await driver.listResources()).filter((resource) =>
        resource.workspaceId?.startsWith(context.idPrefix),
      );
      const orphans = ours.filter((resource) => !records.has(resource.workspaceId!));
      expect(orphans.map((resource) => resource.workspaceId)).toEqual([orphan.workspaceId]);
      expect(orphans[0]!.tenantId).toBe(orphan.tenantId);
      expect(orphans[0]!.locator.length).toBeGreaterThan(0);

      for (const resource of orphans) await driver.reap(resource);
      expect(await driver.exists(orphan)).toBe(false);
      expect(await listed(driver, orphan.workspaceId)).toEqual([]);
      // The main workspace (which has a record) is untouched.
      expect(await driver.exists(context.spec)).toBe(true);
      expect(await driver.isAlive(context.backend)).toBe(true);
    },
  );
}
