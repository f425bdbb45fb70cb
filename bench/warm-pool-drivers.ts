import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import Docker from "dockerode";
import { bubblewrapDriver } from "@/server/workspace/drivers/bubblewrap/driver";
import { ZSandboxConfig } from "@/server/workspace/drivers/bubblewrap/sandbox-config";
import { DockerMachines } from "@/server/workspace/drivers/docker/docker-machines";
import { dockerDriverOver } from "@/server/workspace/drivers/docker/docker-operations";
import { instantiateDriver, type WorkspaceDriver } from "@/server/workspace/drivers/driver";
import {
  BASE_IMAGE,
  containersUnavailable,
  startE2b,
  startKubernetes,
  type Emulated,
} from "./emulated-drivers";

/**
 * The drivers whose warm pools warm-pool.bench.ts measures, each as it runs here: `local` (bubblewrap),
 * `docker` (an engine and the base image), and `kubernetes` and `e2b` against their loopback emulators
 * (emulated-drivers.ts: Pods and sandboxes are local containers, so their figures are Berth's protocol
 * overhead, not a cluster's or E2B's latencies). One that cannot run here is skipped with its reason printed.
 * BERTH_BENCH_POOL_DRIVERS (comma-separated, e.g. `kubernetes,e2b`) keeps only those.
 */
const SOCKET_PATH = process.env.DOCKER_SOCKET ?? "/var/run/docker.sock";
const IDLE_SAMPLE_MS = 20_000;
const IDLE_SETTLE_MS = 40_000;

export type Pooled = {
  driver: WorkspaceDriver;
  /** As the figures name it. */
  label: string;
  /** CPU the installation's idle pool machines use, in cores; or why it is not measured here. */
  idle: { cpuCores: () => Promise<number> } | { notMeasured: string };
  /** Ends what the driver runs against (an emulator, with every machine it made). */
  close?: () => Promise<void>;
};

/** A driver ready to measure, or why it cannot run here. */
type Start = (basedir: string) => Promise<Pooled | string>;

const DRIVERS: ReadonlyArray<[string, Start]> = [
  ["local", startLocal],
  ["docker", startDocker],
  [
    "kubernetes",
    () =>
      emulatedPool(
        "kubernetes (emulator)",
        startKubernetes,
        "the emulator's Pods are local containers; on a cluster an idle pool Pod costs the node share its requests reserve",
      ),
  ],
  [
    "e2b",
    () =>
      emulatedPool(
        "e2b (emulator)",
        startE2b,
        "the emulator's sandboxes are local containers; E2B bills an idle pool sandbox by its running time",
      ),
  ],
];

/** Each driver that runs here in turn, started when asked for (one emulator at a time). */
export async function* driversHere(basedir: string): AsyncGenerator<Pooled> {
  const only = process.env.BERTH_BENCH_POOL_DRIVERS?.split(",").map((name) => name.trim());
  for (const [label, start] of DRIVERS) {
    if (only && !only.includes(label)) continue;
    const started = await start(basedir).catch((error: unknown) => `it did not start (${String(error)})`);
    if (typeof started === "string") process.stdout.write(`  ${label} skipped: ${started}\n`);
    else yield started;
  }
}

async function startLocal(basedir: string): Promise<Pooled | string> {
  const context = { basedir, cwd: process.cwd(), uid: process.getuid?.() ?? -1 };
  const driver = instantiateDriver(bubblewrapDriver, ZSandboxConfig.parse({}), context);
  const probe = await driver.probe?.();
  if (probe && !probe.ok) return probe.reason;
  return { driver, label: "local", idle: { notMeasured: "a pool machine is an empty folder: nothing runs" } };
}

async function startDocker(basedir: string): Promise<Pooled | string> {
  const unavailable = await containersUnavailable();
  if (unavailable) return unavailable;
  const installation = `bench-pool-${randomBytes(3).toString("hex")}`;
  const runtimeRoot = path.join("/tmp", `berth-bp-${randomBytes(3).toString("hex")}`);
  const machines = new DockerMachines(
    {
      socketPath: SOCKET_PATH,
      baseImage: BASE_IMAGE,
      dataRoot: basedir,
      runtimeRoot,
      stopTimeoutSeconds: 1,
    },
    { installationId: () => Promise.resolve(installation) },
  );
  return {
    driver: { ...dockerDriverOver(machines), name: "docker", kind: "docker", summary: "" },
    label: "docker",
    idle: { cpuCores: () => containersCpuCores(new Docker({ socketPath: SOCKET_PATH }), installation) },
    close: () => fs.rm(runtimeRoot, { recursive: true, force: true }),
  };
}

/** A driver against its emulator, the emulator closed with the driver; its idle cost is not measured. */
async function emulatedPool(
  label: string,
  start: (installation: string) => Promise<Emulated<unknown>>,
  notMeasured: string,
): Promise<Pooled | string> {
  const unavailable = await containersUnavailable();
  if (unavailable) return unavailable;
  const emulated = await start(`bench-pool-${randomBytes(3).toString("hex")}`);
  return { driver: emulated.newDriver(), label, idle: { notMeasured }, close: emulated.close };
}

/** CPU the installation's pool containers use at rest, in cores (cgroup totals over IDLE_SAMPLE_MS). */
async function containersCpuCores(docker: Docker, installation: string): Promise<number> {
  const containers = await docker.listContainers({
    filters: { label: [`dev.berth.installation=${installation}`, "dev.berth.pool"] },
  });
  const cpu = async () => {
    let total = 0;
    for (const container of containers) {
      const stats = (await docker.getContainer(container.Id).stats({ stream: false, "one-shot": true })) as {
        cpu_stats?: { cpu_usage?: { total_usage?: number } };
      };
      total += stats.cpu_stats?.cpu_usage?.total_usage ?? 0;
    }
    return total;
  };
  // At rest means after the start: a pool machine's gateway processes spend 0.2-0.9 % of a core each for
  // about half a minute after it is made (measured: 0.02 % each after that), so the window opens later.
  await new Promise((resolve) => setTimeout(resolve, IDLE_SETTLE_MS));
  const before = await cpu();
  const started = performance.now();
  await new Promise((resolve) => setTimeout(resolve, IDLE_SAMPLE_MS));
  const used = (await cpu()) - before;
  return used / 1e9 / ((performance.now() - started) / 1000);
}
