import { instantiateDriver } from "@/server/workspace/drivers/driver";
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { getDb } from "@/server/db";
import {
  sampleWorkspaceResources,
  workspaceResources,
} from "@/server/modules/metrics/resource-usage.service";
import { getWorkspace } from "@/server/modules/workspace/workspace.data";
import { AppError } from "@/server/shared/errors";
import { detectCgroups } from "@/server/workspace/drivers/bubblewrap/sandbox-cgroup";
import { dockerDriver } from "@/server/workspace/drivers/docker/driver";
import {
  BASE_IMAGE,
  describeDocker,
  SOCKET_PATH,
  testInstallationId,
} from "../../drivers/docker/support/docker-env";
import { addTestMember, createTestTenant, expectAppError, type TestTenant } from "../db/fixtures";
import { freshSession, startWorkspaceHarness, type WorkspaceHarness } from "../workspace/harness";
import { processBerth } from "@/server/composition/process-berth";

const MIB = 1024 * 1024;

/**
 * Per-workspace resource samples from the real backends: the confined local one (its folder's size and,
 * as root, its memory cgroup's CPU time) and Docker (the container's stats), stored by the sampler and
 * read back as chart points. Docker runs only where the engine answers (describeDocker).
 */
describe("per-workspace resource samples: local sandbox and Docker (real workers)", () => {
  let h: WorkspaceHarness;
  let tenant: TestTenant;
  const runtimeRoot = path.join("/tmp", `berth-rs-${randomBytes(3).toString("hex")}`);
  const rowsOf = (workspaceId: string) =>
    getDb().resourceSample.findMany({ where: { workspaceId }, orderBy: { id: "asc" } });
  const sample = () =>
    sampleWorkspaceResources({ drivers: h.engine.drivers, retentionDays: 14 }, processBerth().db);

  beforeAll(async () => {
    h = await startWorkspaceHarness(
      { backends: ["local", "docker"] },
      {
        moreDrivers: (basedir) => [
          instantiateDriver(
            dockerDriver,
            dockerDriver.configSchema.parse({
              dataRoot: basedir,
              socketPath: SOCKET_PATH,
              baseImage: BASE_IMAGE,
              runtimeRoot,
              memoryBytes: 512 * MIB,
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
    tenant = await createTestTenant();
  });
  afterAll(async () => {
    await h?.close();
  });

  it("samples a READY local workspace's disk and its memory cgroup, and charts them", async () => {
    const { session, workspaceId } = await freshSession(tenant.scope);
    const { workspace } = await h.service.resolveForSession(tenant.scope, session.id);
    // 4 MiB on disk and some CPU time inside the sandbox (its cgroup counts it).
    const run = await workspace.machine.exec([
      "/bin/sh",
      "-c",
      "head -c 4194304 /dev/urandom > big.bin && head -c 200000000 /dev/zero | sha256sum >/dev/null",
    ]);
    expect(run.exitCode).toBe(0);
    await sample();
    const [first] = await rowsOf(workspaceId);
    expect(Number(first!.diskBytes)).toBeGreaterThanOrEqual(4 * MIB);
    // As root, the workspace's cgroups: its memory and processes, and its CPU time (cgroup v2's cpu.stat;
    // on v1 the cpuacct group the sandboxes join besides the memory group).
    const cgroups = detectCgroups(64 * MIB);
    if (cgroups.available) {
      expect(first!.memoryBytes).not.toBeNull();
      expect(first!.processes).not.toBeNull();
      expect(first!.cpuSeconds).toBeGreaterThan(0);
    } else {
      expect([first!.cpuSeconds, first!.memoryBytes, first!.processes]).toEqual([null, null, null]);
    }

    await workspace.machine.exec(["/bin/sh", "-c", "head -c 2097152 /dev/urandom > more.bin"]);
    await sample();
    const view = await workspaceResources(
      tenant.scope,
      workspaceId,
      { range: "1h" },
      h.engine,
      undefined,
      processBerth().db,
    );
    expect(view.supported).toBe(true);
    const last = view.points.at(-1)!;
    expect(last.diskBytes).toBeGreaterThanOrEqual(6 * MIB);
    expect(view.points.length).toBeGreaterThanOrEqual(1);
  });

  it("samples only READY workspaces: a stopped one gets no new rows", async () => {
    const { session, workspaceId } = await freshSession(tenant.scope);
    await h.service.resolveForSession(tenant.scope, session.id);
    await h.service.requestStop(tenant.scope, workspaceId, { reason: "test" });
    await vi.waitFor(
      async () =>
        expect((await getWorkspace(tenant.scope, workspaceId, processBerth().db)).state).toBe("STOPPED"),
      { timeout: 30_000 },
    );
    await sample();
    expect(await rowsOf(workspaceId)).toEqual([]);
  });

  it("derives CPU percent from consecutive samples and says so where nothing can be sampled", async () => {
    const fresh = await createTestTenant();
    const { session, workspaceId } = await freshSession(fresh.scope);
    await h.service.resolveForSession(fresh.scope, session.id);
    const now = Date.now();
    const at = (secondsAgo: number) => new Date(now - secondsAgo * 1_000);
    await getDb().resourceSample.createMany({
      data: [
        // 30 s → 15 s ago: 3 CPU seconds in 15 s = 20 %; then the machine restarted (no rate across it).
        { tenantId: fresh.tenantId, workspaceId, cpuSeconds: 10, memoryBytes: 100n, at: at(30) },
        { tenantId: fresh.tenantId, workspaceId, cpuSeconds: 13, memoryBytes: 300n, at: at(15) },
        { tenantId: fresh.tenantId, workspaceId, cpuSeconds: 1, memoryBytes: 200n, at: at(0) },
      ],
    });
    const view = await workspaceResources(
      fresh.scope,
      workspaceId,
      { range: "1h" },
      h.engine,
      now,
      processBerth().db,
    );
    const mine = view.points.filter((p) => p.memoryBytes !== null && p.memoryBytes <= 300);
    expect(mine.map((p) => p.cpuPercent)).toEqual([null, 20, null]);
    expect(mine.map((p) => p.memoryBytes)).toEqual([100, 300, 200]);

    // A backend that reports a rate itself (Kubernetes, E2B): the rates of a bucket are averaged (the two
    // samples a second apart may straddle a 15 s bucket boundary).
    const rated = await freshSession(fresh.scope);
    await h.service.resolveForSession(fresh.scope, rated.session.id);
    await getDb().resourceSample.createMany({
      data: [
        { tenantId: fresh.tenantId, workspaceId: rated.workspaceId, cpuPercent: 40, at: at(3) },
        { tenantId: fresh.tenantId, workspaceId: rated.workspaceId, cpuPercent: 80, at: at(2) },
      ],
    });
    const ratedView = await workspaceResources(
      fresh.scope,
      rated.workspaceId,
      { range: "1h" },
      h.engine,
      now,
      processBerth().db,
    );
    expect(ratedView.points.flatMap((p) => (p.cpuPercent === null ? [] : [p.cpuPercent]))).toEqual(
      ratedView.points.length === 1 ? [60] : [40, 80],
    );

    // A backend this installation no longer runs: nothing is sampled, and the page is told so.
    const gone = {
      forKind: () => {
        throw new AppError("UNPROCESSABLE", "backend not run here");
      },
    };
    expect(
      (
        await workspaceResources(
          fresh.scope,
          workspaceId,
          { range: "1h" },
          { drivers: gone },
          undefined,
          processBerth().db,
        )
      ).supported,
    ).toBe(false);
    const member = await addTestMember(fresh, "member");
    await expectAppError(
      workspaceResources(member.scope, workspaceId, { range: "1h" }, h.engine, undefined, processBerth().db),
      "NOT_FOUND",
    );
    await expectAppError(
      workspaceResources(tenant.scope, workspaceId, { range: "1h" }, h.engine, undefined, processBerth().db),
      "NOT_FOUND",
    );
  });

  describeDocker("docker", () => {
    it("samples a running container's memory, CPU time, processes and its work folder", async () => {
      const { session, workspaceId } = await freshSession(tenant.scope, "PER_AGENT", { backend: "docker" });
      try {
        const { workspace } = await h.service.resolveForSession(tenant.scope, session.id);
        await workspace.machine.exec([
          "/bin/sh",
          "-c",
          "head -c 3145728 /dev/urandom > big.bin && head -c 100000000 /dev/zero | sha256sum >/dev/null",
        ]);
        await sample();
        const [row] = await rowsOf(workspaceId);
        expect(row!.cpuSeconds).toBeGreaterThan(0);
        expect(Number(row!.memoryBytes)).toBeGreaterThan(0);
        expect(row!.processes).toBeGreaterThan(0);
        expect(Number(row!.diskBytes)).toBeGreaterThanOrEqual(3 * MIB);
      } finally {
        // The container goes with the test (every run of this file left one running).
        await h.service.requestPurge(tenant.scope, workspaceId, { force: true });
        await vi.waitFor(
          async () =>
            expect((await getWorkspace(tenant.scope, workspaceId, processBerth().db)).state).toBe("PURGED"),
          { timeout: 60_000, interval: 250 },
        );
        await fs.rm(runtimeRoot, { recursive: true, force: true });
      }
    });
  });
});
