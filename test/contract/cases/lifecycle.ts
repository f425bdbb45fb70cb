import { expect } from "vitest";
import type { WorkspaceDriver, WorkspaceSpec } from "@/server/workspace/backend/driver";
import type { ContractContext } from "../backend-contract";
import { pollUntil, textOf } from "../support";

/** Provisions as a worker does and attaches as the API does: the handle goes from one to the other. */
async function provisionAndAttach(driver: WorkspaceDriver, spec: WorkspaceSpec) {
  const handle = await driver.machine.provision(spec);
  const withHandle = { ...spec, handle };
  return { spec: withHandle, backend: await driver.provider.provision(withHandle) };
}

const listed = async (driver: WorkspaceDriver, workspaceId: string) =>
  (await driver.machine.listResources()).filter((resource) => resource.workspaceId === workspaceId);

/** Lifecycle, reattach after a restart, liveness and reconcile: the machine controller's side of the seam. */
export function registerLifecycleCases(context: ContractContext): void {
  context.it(
    "lifecycle: provision returns a JSON handle, attach, stop keeps data, re-provision, purge removes everything",
    async () => {
      const { driver } = context;
      const spec = context.newSpec("life");
      expect(await driver.machine.exists(spec)).toBe(false);
      const handle = await driver.machine.provision(spec);
      // The handle is stored in a jsonb column: it must survive JSON unchanged.
      expect(JSON.parse(JSON.stringify(handle))).toEqual(handle);
      expect(JSON.stringify(handle)).not.toMatch(/token|secret|password/i);
      expect(await driver.machine.exists(spec)).toBe(true);
      expect(await listed(driver, spec.workspaceId)).toHaveLength(1);

      const first = await driver.provider.provision({ ...spec, handle });
      expect(first.workdir.startsWith("/")).toBe(true);
      await first.writeFile("kept/note.txt", "survives a stop");
      await first.close();

      await driver.machine.stop({ ...spec, handle });
      expect(await driver.machine.exists({ ...spec, handle })).toBe(true);
      const again = await driver.machine.provision({ ...spec, handle });
      const second = await driver.provider.provision({ ...spec, handle: again });
      if (driver.capabilities.persistent) {
        expect(await textOf(await second.readFile("kept/note.txt"))).toBe("survives a stop");
      }
      expect((await second.exec(["sh", "-c", "echo up"])).stdout.toString()).toBe("up\n");
      await second.close();

      const deleted = await driver.machine.purge({ ...spec, handle: again });
      expect(deleted.length).toBeGreaterThan(0);
      expect(deleted.every((entry) => typeof entry === "string" && entry.length > 0)).toBe(true);
      expect(await driver.machine.exists({ ...spec, handle: again })).toBe(false);
      expect(await listed(driver, spec.workspaceId)).toEqual([]);
      // Idempotent: a job retried after a crash purges again.
      await driver.machine.purge({ ...spec, handle: again });
    },
  );

  context.it(
    "capabilities: the backend is what the driver says it is (kind, isolation, host paths)",
    async () => {
      const { driver, backend } = context;
      expect(backend.kind).toBe(driver.kind);
      expect(driver.provider.kind).toBe(driver.kind);
      expect(driver.machine.kind).toBe(driver.kind);
      expect(backend.isolated).toBe(driver.capabilities.isolated);
      expect(driver.isolation).toMatchObject({
        backend: driver.name,
        isolated: driver.capabilities.isolated,
      });
      expect(driver.provider.persistent).toBe(driver.capabilities.persistent);
      expect(driver.provider.mayVanish ?? true).toBe(driver.capabilities.mayVanish);
      // `hostPaths` promises WorkspaceBackend.hostPath (bulk writers go direct through it).
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
      const other = await restarted.provider.provision(spec);
      try {
        expect(other.workdir).toBe(backend.workdir);
        expect(await textOf(await other.readFile("reattach/state.txt"))).toBe("from the first process");
        await other.writeFile("reattach/back.txt", "from the restart");
        expect(await textOf(await backend.readFile("reattach/back.txt"))).toBe("from the restart");
        expect((await other.exec(["cat", "reattach/state.txt"])).stdout.toString()).toBe(
          "from the first process",
        );
        expect(await restarted.provider.isAlive(other)).toBe(true);
      } finally {
        // Letting go in one process leaves the machine running for the others.
        await (restarted.provider.detach ? restarted.provider.detach(other) : other.close());
      }
      expect(await context.driver.provider.isAlive(backend)).toBe(true);
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
      expect(await driver.provider.isAlive(attached.backend)).toBe(true);

      await worker.machine.stop(attached.spec);
      if (driver.capabilities.mayVanish) {
        expect(
          await pollUntil(
            () => driver.provider.isAlive(attached.backend),
            (alive) => !alive,
          ),
        ).toBe(false);
      } else {
        // Only Berth deletes such machines: a stopped one is still there to use.
        expect(await driver.provider.isAlive(attached.backend)).toBe(true);
      }
      await attached.backend.close();

      const back = await provisionAndAttach(worker, attached.spec);
      const reattached = await driver.provider.provision(back.spec);
      expect(await driver.provider.isAlive(reattached)).toBe(true);
      expect(await textOf(await reattached.readFile("alive.txt"))).toBe("yes");
      await back.backend.close();

      await worker.machine.purge(back.spec);
      if (driver.capabilities.mayVanish) {
        expect(
          await pollUntil(
            () => driver.provider.isAlive(reattached),
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
      await driver.machine.provision(orphan);
      // The records this suite knows of: every workspace it made except the orphan.
      const records = new Set(
        context.created.filter((spec) => spec !== orphan).map((spec) => spec.workspaceId),
      );
      const ours = (await driver.machine.listResources()).filter((resource) =>
        resource.workspaceId?.startsWith(context.idPrefix),
      );
      const orphans = ours.filter((resource) => !records.has(resource.workspaceId!));
      expect(orphans.map((resource) => resource.workspaceId)).toEqual([orphan.workspaceId]);
      expect(orphans[0]!.tenantId).toBe(orphan.tenantId);
      expect(orphans[0]!.locator.length).toBeGreaterThan(0);

      for (const resource of orphans) await driver.machine.reap(resource);
      expect(await driver.machine.exists(orphan)).toBe(false);
      expect(await listed(driver, orphan.workspaceId)).toEqual([]);
      // The main workspace (which has a record) is untouched.
      expect(await driver.machine.exists(context.spec)).toBe(true);
      expect(await driver.provider.isAlive(context.backend)).toBe(true);
    },
  );
}
