import { randomBytes } from "node:crypto";
import path from "node:path";
import { afterAll, beforeAll, expect, it, vi } from "vitest";
import Docker from "dockerode";
import { getDb } from "@/server/db";
import { getWorkspace } from "@/server/modules/workspace/workspace.data";
import { containerName } from "@/server/workspace/drivers/docker/docker-config";
import { describeDocker, SOCKET_PATH } from "../../drivers/docker/support/docker-env";
import { createTestTenant, type TestTenant } from "../db/fixtures";
import { dockerTestDriver } from "./backend-drivers";
import { freshSession, startWorkspaceHarness, type WorkspaceHarness } from "./harness";

/**
 * One deployment, two backends: the confined `local` driver (the default) and `docker`, side by side in
 * the same engine and workers. The agent, then the tenant, chooses; each workspace records its backend and
 * stays on it; stop and purge go to that backend's own driver.
 */
describeDocker("several backends in one deployment (local + docker, real workers)", () => {
  let h: WorkspaceHarness;
  let tenant: TestTenant;
  const docker = new Docker({ socketPath: SOCKET_PATH });
  const runtimeRoot = path.join("/tmp", `berth-mb-${randomBytes(3).toString("hex")}`);

  beforeAll(async () => {
    h = await startWorkspaceHarness(
      { backends: ["local", "docker"] },
      {
        moreDrivers: (basedir) => [dockerTestDriver(basedir, runtimeRoot)],
      },
    );
    tenant = await createTestTenant();
  });
  afterAll(async () => {
    await h?.close();
  });

  const containerOf = (workspaceId: string) =>
    docker
      .getContainer(containerName({ tenantId: tenant.tenantId, userId: tenant.owner.id, workspaceId }))
      .inspect()
      .catch(() => null);

  it("an agent that chooses docker gets a container; one that does not stays on the default local sandbox", async () => {
    const onDocker = await freshSession(tenant.scope, "PER_AGENT", { backend: "docker" });
    const onLocal = await freshSession(tenant.scope);

    const [dockerSide, localSide] = await Promise.all([
      h.service.resolveForSession(tenant.scope, onDocker.session.id),
      h.service.resolveForSession(tenant.scope, onLocal.session.id),
    ]);
    expect(dockerSide.workspace.kind).toBe("docker");
    expect(localSide.workspace.kind).toBe("local");
    const hostname = await dockerSide.workspace.machine.exec(["hostname"]);
    expect(hostname.exitCode).toBe(0);
    expect((await containerOf(onDocker.workspaceId))?.State.Running).toBe(true);
    expect(await containerOf(onLocal.workspaceId)).toBeNull();

    // The API reports each record's own backend and isolation.
    const dto = await h.service.get(tenant.scope, onDocker.workspaceId);
    expect(dto).toMatchObject({ backendKind: "docker", backend: "docker", isolated: true });
    expect(await h.service.get(tenant.scope, onLocal.workspaceId)).toMatchObject({
      backendKind: "local",
      backend: "local",
    });
    // The provision stored its handle: the reattach key the driver gets back on every attach.
    const row = await getDb().workspace.findUnique({ where: { id: onDocker.workspaceId } });
    expect(row?.backendHandle).toMatchObject({ container: expect.stringMatching(/^berth-/) });

    // Stop goes to the record's own driver: the container stops, the local sandbox is untouched.
    await h.service.requestStop(tenant.scope, onDocker.workspaceId, { reason: "test" });
    await vi.waitFor(
      async () =>
        expect((await getWorkspace(tenant.scope, onDocker.workspaceId, getDb())).state).toBe("STOPPED"),
      { timeout: 30_000 },
    );
    expect((await containerOf(onDocker.workspaceId))?.State.Running).toBe(false);
    expect((await getWorkspace(tenant.scope, onLocal.workspaceId, getDb())).state).toBe("READY");

    await h.service.requestPurge(tenant.scope, onDocker.workspaceId, { force: true });
    await vi.waitFor(
      async () =>
        expect((await getWorkspace(tenant.scope, onDocker.workspaceId, getDb())).state).toBe("PURGED"),
      { timeout: 30_000 },
    );
    expect(await containerOf(onDocker.workspaceId)).toBeNull();
  });

  it("the tenant's default applies to agents without a choice, and a workspace keeps the backend it was made on", async () => {
    await h.service.backends.setTenantDefault(tenant.scope, { defaultBackend: "docker" });
    try {
      const inherits = await freshSession(tenant.scope);
      const { workspace } = await h.service.resolveForSession(tenant.scope, inherits.session.id);
      expect(workspace.kind).toBe("docker");

      // Changing the default later moves nothing: the record says docker, and docker it stays.
      await h.service.backends.setTenantDefault(tenant.scope, { defaultBackend: null });
      const again = await h.service.get(tenant.scope, inherits.workspaceId);
      expect(again.backendKind).toBe("docker");
      await h.service.requestPurge(tenant.scope, inherits.workspaceId, { force: true });
      await vi.waitFor(
        async () =>
          expect((await getWorkspace(tenant.scope, inherits.workspaceId, getDb())).state).toBe("PURGED"),
        { timeout: 30_000 },
      );
    } finally {
      await h.service.backends.setTenantDefault(tenant.scope, { defaultBackend: null });
    }
  });

  it("refuses, with a typed 422 naming what is enabled, a backend the installation does not run", async () => {
    await expect(
      h.service.backends.setTenantDefault(tenant.scope, { defaultBackend: "e2b" }),
    ).rejects.toMatchObject({
      code: "UNPROCESSABLE",
      userMessage: expect.stringContaining("local, docker"),
    });
    expect(() => h.service.backends.assertChoosable("kubernetes")).toThrow(/not enabled/);
    const options = await h.service.backends.options(tenant.scope);
    expect(options.available.map((option) => [option.kind, option.driver, option.isolated])).toEqual([
      ["local", "local", true],
      ["docker", "docker", true],
    ]);
    expect(options.installationDefault).toBe("local");
  });
});
