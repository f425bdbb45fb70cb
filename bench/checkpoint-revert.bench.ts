import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import Docker from "dockerode";
import { captureCheckpoint } from "@/server/workspace/checkpoints/capture";
import { FolderCheckpointStore } from "@/server/workspace/checkpoints/checkpoint-store";
import { restoreCheckpoint } from "@/server/workspace/checkpoints/restore";
import { dockerDriver } from "@/server/workspace/drivers/docker/driver";
import {
  type BenchMachine,
  localMachine,
  machineOf,
  MB,
  spawnOk,
  tarOf,
  TENANT,
  tempDir,
  timed,
  writeTree,
} from "./checkpoint-support";
import { median, result, type BenchResult } from "./lib";

/**
 * Reverting a turn (issue 24): restoreCheckpoint of a 100 MB, 10k-file workspace whose work folder was
 * deleted (every file written back from the store through the machine's putArchive), against copying the
 * same tree the backend's plain way in the same run: `cp -a` on the host for `local` (bubblewrap), and
 * `docker cp` into the container for Docker (skipped, with the reason, without an engine).
 */
const FILES = 10_000;
const FILE_BYTES = 10 * 1024;
const ROUNDS = 3;
const SOCKET_PATH = process.env.DOCKER_SOCKET ?? "/var/run/docker.sock";
const BASE_IMAGE = process.env.BERTH_BASE_IMAGE ?? "berth-base:bookworm";

type Figures = { restoreMs: number; copyMs: number; written: number };

export async function run(): Promise<BenchResult[]> {
  const root = await tempDir("berth-bench-revert-");
  try {
    const tree = path.join(root, "tree");
    await fs.mkdir(tree);
    await writeTree(tree, FILES, FILE_BYTES);
    const results: BenchResult[] = [];
    const local = await localMachine(await subdir(root, "local"));
    if (typeof local === "string") process.stdout.write(`  local skipped: ${local}\n`);
    else {
      const figures = await revertRounds(local, tree, root, async () => {
        const target = path.join(root, `cp-${randomBytes(3).toString("hex")}`);
        const ms = await timed(() => spawnOk("cp", ["-a", tree, target]));
        await fs.rm(target, { recursive: true, force: true });
        return ms;
      });
      results.push(row("local", figures, "cp -a of the same tree (host)"));
    }
    const docker = await dockerMachine(await subdir(root, "docker"));
    if (typeof docker === "string") process.stdout.write(`  docker skipped: ${docker}\n`);
    else {
      const container = (await docker.machine.exec(["hostname"])).stdout.toString().trim();
      const figures = await revertRounds(docker, tree, root, async () => {
        const target = `${docker.machine.workdir}/.cp-${randomBytes(3).toString("hex")}`;
        const ms = await timed(() => spawnOk("docker", ["cp", tree, `${container}:${target}`]));
        await spawnOk("docker", ["exec", "-u", "0", container, "rm", "-rf", target]);
        return ms;
      });
      results.push(row("docker", figures, "docker cp of the same tree into the container"));
    }
    return results;
  } finally {
    await fs.rm(root, { recursive: true, force: true });
  }
}

async function subdir(root: string, name: string): Promise<string> {
  const dir = path.join(root, name);
  await fs.mkdir(dir);
  return dir;
}

/** Puts the tree in, checkpoints it, then ROUNDS times: delete it, restore it (timed), copy it (timed). */
async function revertRounds(
  bench: BenchMachine,
  tree: string,
  root: string,
  copy: () => Promise<number>,
): Promise<Figures> {
  try {
    const { machine } = bench;
    await machine.putArchive(".", tarOf(tree)); // the tree's top folder is `.`: `./src/...`
    const store = new FolderCheckpointStore(path.join(root, `store-${randomBytes(3).toString("hex")}`));
    const checkpoint = await captureCheckpoint({ machine, store, tenantId: TENANT, previous: null });
    const restoreMs: number[] = [];
    const copyMs: number[] = [];
    let written = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const wrecked = await machine.exec(["rm", "-rf", "src"]);
      if (wrecked.exitCode !== 0) throw new Error(`rm -rf src: ${wrecked.stderr.toString()}`);
      const start = performance.now();
      const restored = await restoreCheckpoint({ machine, store, tenantId: TENANT, root: checkpoint.root });
      restoreMs.push(performance.now() - start);
      written = restored.written;
      if (restored.writtenBytes < FILES * FILE_BYTES)
        throw new Error(`restore wrote ${restored.writtenBytes} bytes`);
      copyMs.push(await copy());
    }
    return { restoreMs: median(restoreMs), copyMs: median(copyMs), written };
  } finally {
    await bench.close();
  }
}

function row(backend: string, figures: Figures, baseline: string): BenchResult {
  process.stdout.write(
    `  ${backend}: restore ${figures.restoreMs.toFixed(0)} ms (${figures.written} entries), copy ${figures.copyMs.toFixed(0)} ms\n`,
  );
  return result({
    name: `checkpoints: revert ${Math.round((FILES * FILE_BYTES) / MB)} MB / ${FILES / 1000}k files (${backend})`,
    value: figures.restoreMs,
    unit: "ms",
    baseline,
    baselineValue: figures.copyMs,
    target: { atMost: 1.5 },
  });
}

/** A Docker workspace of the docker driver, or the reason there is none. */
async function dockerMachine(basedir: string): Promise<BenchMachine | string> {
  try {
    const docker = new Docker({ socketPath: SOCKET_PATH });
    await docker.ping();
    await docker.getImage(BASE_IMAGE).inspect();
  } catch (error) {
    return `no Docker engine or ${BASE_IMAGE} (${String(error)})`;
  }
  const context = { basedir, cwd: process.cwd(), uid: process.getuid?.() ?? -1 };
  const runtimeRoot = path.join("/tmp", `berth-bench-crt-${randomBytes(3).toString("hex")}`);
  const fromEnv = dockerDriver.configFromEnv(
    {
      DOCKER_SOCKET: SOCKET_PATH,
      BERTH_DOCKER_BASE_IMAGE: BASE_IMAGE,
      BERTH_DOCKER_RUNTIME_ROOT: runtimeRoot,
    },
    context,
  ) as Record<string, unknown>;
  const config = dockerDriver.configSchema.parse({ ...fromEnv, stopTimeoutSeconds: 1 });
  const bench = await machineOf(dockerDriver, config, basedir, {
    installationId: () => Promise.resolve("bench"),
  });
  return {
    ...bench,
    async close() {
      await bench.close();
      await fs.rm(runtimeRoot, { recursive: true, force: true });
    },
  };
}
