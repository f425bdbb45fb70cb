import fs from "node:fs/promises";
import path from "node:path";
import { Sandbox } from "e2b";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { CreateProgress, WorkspaceDriver, WorkspaceSpec } from "@/server/workspace/drivers/driver";
import { ZE2bHandle } from "@/server/workspace/drivers/e2b/e2b-naming";
import { createDriverTestbed, type DriverTestbed } from "./support/e2b-driver-env";
import { describeE2b } from "./support/e2b-env";

describeE2b(
  "E2B driver lifecycle against the emulator: provision, stop, resume, reattach, vanish, race, purge, reap",
  () => {
    let testbed: DriverTestbed;
    let driver: WorkspaceDriver;
    /**
     * One workspace for the cases that take its sandbox through a life (stop and resume, reattach, deleted
     * behind Berth's back, a broken resume, purge, reap): each starts with a provision, which reattaches,
     * resumes or replaces what the case before left, instead of creating a sandbox and starting a gateway of
     * its own. Its first provision is the one the first case checks. Racing, foreign and differently
     * configured drivers get workspaces of their own.
     */
    let shared: WorkspaceSpec;
    let firstProvision: Awaited<ReturnType<typeof provision>>;
    let provisionedAfter = 0;
    const sdk = () => testbed.emulator.connection;

    const provision = async (target: WorkspaceDriver, spec: WorkspaceSpec) => {
      const steps: CreateProgress[] = [];
      const handle = ZE2bHandle.parse(await target.create(spec, { onProgress: (step) => steps.push(step) }));
      return { handle, steps: steps.map((step) => step.step), details: steps, spec: { ...spec, handle } };
    };
    const workspaceSandboxes = async (spec: WorkspaceSpec) =>
      Sandbox.list({ ...sdk(), query: { metadata: { "berth.workspace": spec.workspaceId } } }).nextItems();

    beforeAll(async () => {
      testbed = await createDriverTestbed();
      driver = testbed.newDriver();
      shared = testbed.spec();
      provisionedAfter = Date.now();
      firstProvision = await provision(driver, shared);
    });
    afterAll(async () => {
      await testbed?.cleanup();
    });

    it("provisions one sandbox per workspace from the template, with Berth's metadata and timeout", async () => {
      const before = provisionedAfter;
      const { handle, steps, spec } = firstProvision;
      expect(steps).toEqual(["sandbox.created", "gateway.started"]);
      expect(handle).toMatchObject({
        kind: "e2b",
        template: "base",
        resumed: false,
        replaced: null,
        missing: [],
      });
      const info = await Sandbox.getInfo(handle.sandboxId, sdk());
      expect(info.metadata).toEqual({
        "berth.managed": "true",
        "berth.installation": "berth-test",
        "berth.workspace": spec.workspaceId,
        "berth.tenant": "tenant-test",
        "berth.user": "user-test",
        "berth.agent": "agent-test",
      });
      // Idle TTL 600 s + 5 min margin, within the 1 h cap; E2B pauses (not kills) if Berth is not there.
      expect(info.endAt.getTime()).toBeGreaterThanOrEqual(before + 900_000);
      expect(info.lifecycle?.onTimeout).toBe("pause");
      expect(await driver.exists(spec)).toBe(true);
      expect(await driver.listResources()).toContainEqual({
        workspaceId: spec.workspaceId,
        tenantId: "tenant-test",
        locator: handle.sandboxId,
      });
      // Provisioning again changes nothing.
      const again = await provision(driver, spec);
      expect(again.handle.sandboxId).toBe(handle.sandboxId);
      expect(again.handle.markerNonce).toBe(handle.markerNonce);
      expect(again.steps).toEqual(["sandbox.reattaching", "gateway.reused"]);
      expect(await workspaceSandboxes(spec)).toHaveLength(1);
    });

    it("stop pauses and keeps the data; the next provision resumes the same sandbox with its gateway", async () => {
      const first = await provision(driver, shared);
      const backend = await driver.attach(first.spec);
      await backend.writeFile("notes.txt", "kept across stop");
      await backend.close();
      await driver.stop(first.spec);
      expect((await Sandbox.getInfo(first.handle.sandboxId, sdk())).state).toBe("paused");
      expect(await driver.exists(first.spec)).toBe(true);
      // A paused sandbox runs nothing: no usage to sample.
      expect(await driver.usage!(first.spec)).toBeNull();

      const resumed = await provision(driver, first.spec);
      expect(resumed.handle).toMatchObject({
        sandboxId: first.handle.sandboxId,
        resumed: true,
        missing: [],
        replaced: null,
      });
      // Paused with memory: the gateway process was frozen with it and answers again.
      expect(resumed.steps).toEqual(["sandbox.resuming", "gateway.reused"]);
      const attached = await driver.attach(resumed.spec);
      expect((await attached.exec(["cat", "notes.txt"])).stdout.toString()).toBe("kept across stop");
      await attached.close();
    });

    it("a fresh driver (a restarted process) reattaches by the stored handle; attaching resumes a sandbox E2B paused", async () => {
      const { spec, handle } = await provision(driver, shared);
      const first = await driver.attach(spec);
      await first.writeFile("f.txt", "same sandbox");
      await first.close();

      const restarted = testbed.newDriver();
      const reattached = await restarted.attach(spec);
      expect((await reattached.exec(["cat", "f.txt"])).stdout.toString()).toBe("same sandbox");
      expect(await restarted.isAlive(reattached)).toBe(true);
      await reattached.close();

      // E2B paused it on its own (its timeout passed): the next attach resumes it transparently.
      await Sandbox.pause(handle.sandboxId, sdk());
      const cached = await driver.attach(spec);
      expect(await driver.isAlive(cached)).toBe(true);
      expect((await cached.stat("f.txt"))?.size).toBe(12);
      await Sandbox.pause(handle.sandboxId, sdk());
      expect(await driver.isAlive(cached)).toBe(false); // a cache hit re-checks and re-provisions
      await cached.close();

      // Without credentials on this host (another host's process), the gateway is restarted with a new token.
      const elsewhere = testbed.newDriver({ runtimeDir: path.join(testbed.basedir, "other-host") });
      const remote = await elsewhere.attach(spec);
      const connector = await elsewhere.connectMcp!(remote);
      expect(connector).toBeDefined();
      await remote.close();
    });

    it("detects a sandbox deleted behind Berth's back and replaces it, saying what was lost", async () => {
      const { spec, handle } = await provision(driver, shared);
      const backend = await driver.attach(spec);
      expect(await driver.isAlive(backend)).toBe(true);
      await Sandbox.kill(handle.sandboxId, sdk());
      expect(await driver.isAlive(backend)).toBe(false);
      expect(await driver.exists(spec)).toBe(false);
      await expect(driver.attach(spec)).rejects.toMatchObject({
        code: "UNAVAILABLE",
        details: { reason: "sandbox_missing" },
      });
      await backend.close();

      const replaced = await provision(driver, spec);
      expect(replaced.handle.sandboxId).not.toBe(handle.sandboxId);
      expect(replaced.handle.replaced).toEqual({ previousSandboxId: handle.sandboxId, reason: "not_found" });
      expect(replaced.steps).toEqual(["sandbox.lost", "sandbox.created", "gateway.started"]);
      expect(replaced.details[0]?.detail).toMatch(/files in it are lost/);
    });

    it("verifies a resumed sandbox and reports what did not survive", async () => {
      const { spec, handle } = await provision(driver, shared);
      // Behind Berth's back, as reported by E2B users: the resumed filesystem lacks the workspace.
      const raw = await Sandbox.connect(handle.sandboxId, sdk());
      await raw.commands.run("rm -rf /opt/berth/workspace.json /home/user/workspace", { user: "root" });
      await raw.pause();

      const resumed = await provision(driver, spec);
      expect(resumed.handle).toMatchObject({
        sandboxId: handle.sandboxId,
        resumed: true,
        missing: ["marker", "workdir"],
      });
      expect(resumed.steps).toContain("workspace.verify-failed");
      expect(resumed.details.find((step) => step.step === "workspace.verify-failed")?.detail).toMatch(
        /without its marker and workdir/,
      );
      // Repaired: the next provision finds everything again.
      expect((await provision(driver, resumed.spec)).handle.missing).toEqual([]);
    });

    it("never leaves two sandboxes for one workspace: racing provisions agree, duplicates are killed", async () => {
      const spec = testbed.spec();
      const racers = [driver, testbed.newDriver(), testbed.newDriver(), testbed.newDriver()];
      const handles = await Promise.all(racers.map((racer) => provision(racer, spec)));
      expect(new Set(handles.map((result) => result.handle.sandboxId)).size).toBe(1);
      expect(new Set(handles.map((result) => result.handle.markerNonce)).size).toBe(1);
      expect((await workspaceSandboxes(spec)).map((sandbox) => sandbox.sandboxId)).toEqual([
        handles[0]!.handle.sandboxId,
      ]);

      // A duplicate a crashed racer left behind (younger, same metadata) goes at the next provision.
      const info = await Sandbox.getInfo(handles[0]!.handle.sandboxId, sdk());
      const duplicate = await Sandbox.create("base", { ...sdk(), metadata: info.metadata });
      const next = await provision(driver, handles[0]!.spec);
      expect(next.steps).toContain("sandbox.duplicate-killed");
      expect(next.handle.sandboxId).toBe(handles[0]!.handle.sandboxId);
      expect(await Sandbox.getInfo(duplicate.sandboxId, sdk()).catch(() => null)).toBeNull();
    });

    it("purge kills the sandbox and forgets its gateway credentials", async () => {
      const { spec, handle } = await provision(driver, shared);
      const credentials = path.join(testbed.basedir, ".runtime", "e2b", `${handle.sandboxId}.gateway.json`);
      await fs.access(credentials);
      expect(await driver.purge(spec)).toEqual([`sandbox:${handle.sandboxId}`]);
      expect(await driver.exists(spec)).toBe(false);
      await expect(fs.access(credentials)).rejects.toThrow();
      expect(await driver.purge(spec)).toEqual([]);
      // After a purge the record has no handle: the next use provisions a fresh, empty sandbox.
      const fresh = await provision(driver, { ...spec, handle: null });
      expect(fresh.handle.sandboxId).not.toBe(handle.sandboxId);
      expect(fresh.handle.replaced).toBeNull();
    });

    // After purge (which leaves the shared workspace a fresh sandbox), and it reaps that one.
    it("reconcile lists this installation's sandboxes and reaps orphans, never a foreign one", async () => {
      const orphan = await provision(driver, shared);
      const other = testbed.newDriver({ installation: "someone-else" });
      const foreign = await provision(other, testbed.spec());
      const resources = await driver.listResources();
      expect(resources.map((resource) => resource.locator)).toContain(orphan.handle.sandboxId);
      expect(resources.map((resource) => resource.locator)).not.toContain(foreign.handle.sandboxId);
      await driver.reap({ workspaceId: null, tenantId: null, locator: orphan.handle.sandboxId });
      expect(await driver.exists(orphan.spec)).toBe(false);
      await expect(
        driver.reap({ workspaceId: null, tenantId: null, locator: foreign.handle.sandboxId }),
      ).rejects.toMatchObject({ code: "BAD_REQUEST" });
      expect(await other.exists(foreign.spec)).toBe(true);
    });

    it("keeps the E2B timeout ahead of a running command, so E2B never kills a sandbox mid-turn", async () => {
      // A 5 s sandbox timeout, killed (not paused) at expiry: a 12 s command must still finish.
      const strict = testbed.newDriver({
        idleTtlMs: 5_000,
        timeoutMarginMs: 0,
        maxSandboxTimeoutMs: 10_000,
        onTimeout: "kill",
      });
      const { spec } = await provision(strict, testbed.spec());
      const backend = await strict.attach(spec);
      const result = await backend.exec(["sh", "-c", "sleep 12; echo survived"]);
      expect(result.stdout.toString()).toBe("survived\n");
      expect(await strict.isAlive(backend)).toBe(true);
      await backend.close();
    });
  },
);
