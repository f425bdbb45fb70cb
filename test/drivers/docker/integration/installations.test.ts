/**
 * Issue 11 ("One Docker engine, several installations"): two Berth installations (each its own database,
 * basedir and Redis prefix, so each its own installation id) whose worker processes share ONE Docker
 * engine, each reconciling. Before installation ids, reconcile listed every container labelled as Berth's
 * and reaped those without a record in its own database: each installation deleted the other's workspaces.
 * Now each reaps only its own orphans; the other's containers, and a container made before installations
 * were labelled (owner unknown), stay.
 */
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import Docker from "dockerode";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import {
  dropDatabase,
  ensureDatabase,
  migrateDeploy,
  withDatabase,
  databaseName,
} from "@/scripts/services/database";
import { BASE_IMAGE, describeDocker, SOCKET_PATH } from "../support/docker-env";
import {
  installationCalls,
  startChild,
  stopChildren,
  type Child,
} from "../../../integration/multiprocess/processes";

type Report = { reapedOrphans: Array<{ workspaceId: string | null }> };

describeDocker("installations sharing one Docker engine", { timeout: 600_000 }, () => {
  const docker = new Docker({ socketPath: SOCKET_PATH });
  const run = randomBytes(3).toString("hex");
  const secondDatabase = withDatabase(
    process.env.DATABASE_URL!,
    `${databaseName(process.env.DATABASE_URL!)}_b`,
  );
  const containers: string[] = [];
  const dirs: string[] = [];
  let children: Child[] = [];

  beforeAll(async () => {
    await ensureDatabase(secondDatabase);
    await migrateDeploy(secondDatabase);
  }, 300_000);
  afterEach(async (context) => {
    await stopChildren(children, context.task.result?.state === "fail");
    children = [];
  });
  afterAll(async () => {
    for (const name of containers)
      await docker
        .getContainer(name)
        .remove({ force: true })
        .catch(() => undefined);
    for (const dir of dirs) await fs.rm(dir, { recursive: true, force: true });
    await dropDatabase(secondDatabase).catch(() => undefined);
  });

  async function startInstallation(name: string, databaseUrl: string) {
    const basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), `berth-inst-${name}-`)));
    const runtimeRoot = path.join("/tmp", `berth-i${name}-${run}`);
    dirs.push(basedir, runtimeRoot);
    const child = startChild("installation-process.ts", {
      DATABASE_URL: databaseUrl,
      BERTH_REDIS_PREFIX: `${process.env.BERTH_REDIS_PREFIX}-inst-${name}-${run}`,
      BERTH_WORKSPACE_BACKEND: "docker",
      BERTH_WORKSPACE_BASEDIR: basedir,
      DOCKER_SOCKET: SOCKET_PATH,
      BERTH_DOCKER_BASE_IMAGE: BASE_IMAGE,
      BERTH_DOCKER_RUNTIME_ROOT: runtimeRoot,
      BERTH_DOCKER_MEMORY_BYTES: String(512 * 1024 * 1024),
      LOG_LEVEL: "silent",
    });
    children.push(child);
    await child.nextLine((line) => line === "ready");
    return installationCalls(child, name);
  }

  const exists = (name: string) =>
    docker
      .getContainer(name)
      .inspect()
      .then(
        () => true,
        () => false,
      );

  it("each installation reconciles only its own containers", async () => {
    const a = await startInstallation("a", process.env.DATABASE_URL!);
    const b = await startInstallation("b", secondDatabase);
    const [idA, idB] = [await a("installation"), await b("installation")];
    expect(idA).not.toBe(idB);
    // Stable: asked again (any process of the installation asks its database), the same id.
    expect(await a("installation")).toBe(idA);

    const provision = async (call: typeof a, workspaceId: string) => {
      const name = (await call("provision", { workspaceId })) as string;
      containers.push(name);
      return name;
    };
    const keptA = await provision(a, `inst-a-kept-${run}`);
    const orphanA = await provision(a, `inst-a-orphan-${run}`);
    const keptB = await provision(b, `inst-b-kept-${run}`);
    expect((await docker.getContainer(keptB).inspect()).Config.Labels["dev.berth.installation"]).toBe(idB);

    // A container from before installation ids: Berth's labels, no installation. Nobody knows its owner.
    const legacy = `berth-ws-legacy-${run}`;
    containers.push(legacy);
    await docker.createContainer({
      name: legacy,
      Image: BASE_IMAGE,
      Cmd: ["sleep", "infinity"],
      Labels: {
        "dev.berth.managed": "true",
        "dev.berth.workspace": `legacy-${run}`,
        "dev.berth.tenant": "legacy-tenant",
        "dev.berth.user": "legacy-user",
      },
    });

    // A's own orphan: its record goes, its container stays behind.
    await a("forget", { workspaceId: `inst-a-orphan-${run}` });

    const reportA = (await a("reconcile")) as Report;
    expect(reportA.reapedOrphans.map((orphan) => orphan.workspaceId)).toEqual([`inst-a-orphan-${run}`]);
    const reportB = (await b("reconcile")) as Report;
    expect(reportB.reapedOrphans).toEqual([]);

    expect(await exists(orphanA)).toBe(false);
    expect(await exists(keptA)).toBe(true);
    expect(await exists(keptB)).toBe(true);
    expect(await exists(legacy)).toBe(true);
  });
});
