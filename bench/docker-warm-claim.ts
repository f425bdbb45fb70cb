import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { DockerMachines } from "@/server/workspace/drivers/docker/docker-machines";
import { dockerDriverOver } from "@/server/workspace/drivers/docker/docker-operations";
import type { WorkspaceSpec } from "@/server/workspace/drivers/driver";
import { median } from "./lib";

export type WarmClaimOptions = {
  /** Claims measured (each on its own pool machine, made beforehand and not timed). Default 20. */
  runs?: number;
  socketPath?: string;
  baseImage?: string;
  /** Pool machines made at once before the timed part (each start costs seconds on a loaded host). */
  makeConcurrency?: number;
};

/**
 * A timing probe run by hand (not part of `npm run bench`): what a first use costs when a warm Docker pool
 * machine is claimed, against one command on a machine already attached.
 * - claim → first command: the workers' `bindIdleMachine`, then another process' driver (the API's)
 *   attaching with the returned handle, then `exec(["true"])`;
 * - bare exec: one more `exec(["true"])` on that attached machine, right after.
 * Run: `npx tsx bench/docker-warm-claim.ts [runs]`. Needs the engine and the base image.
 */
export async function measureDockerWarmClaim(
  options: WarmClaimOptions = {},
): Promise<{ bareExecMs: number[]; claimToFirstCommandMs: number[] }> {
  const runs = options.runs ?? 20;
  const dataRoot = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-bench-pool-")));
  const config = {
    socketPath: options.socketPath ?? process.env.DOCKER_SOCKET ?? "/var/run/docker.sock",
    baseImage: options.baseImage ?? process.env.BERTH_BASE_IMAGE ?? "berth-base:bookworm",
    dataRoot,
    runtimeRoot: path.join("/tmp", `berth-bpool-${randomBytes(3).toString("hex")}`),
    stopTimeoutSeconds: 1,
  };
  /** The probe's own installation id: its containers are no installation's to list or reap. */
  const deps = { installationId: () => Promise.resolve(`bench-pool-${randomBytes(3).toString("hex")}`) };
  const workers = dockerDriverOver(new DockerMachines(config, deps));
  const prefix = `bench-${randomBytes(3).toString("hex")}`;
  const ids = Array.from({ length: runs }, (_, index) => `${prefix}-${index}`);
  const specs: WorkspaceSpec[] = [];
  try {
    const pending = [...ids];
    const makers = Array.from({ length: options.makeConcurrency ?? 3 }, async () => {
      for (let id = pending.shift(); id !== undefined; id = pending.shift()) {
        await workers.createIdleMachine!(id);
      }
    });
    await Promise.all(makers);

    const bareExecMs: number[] = [];
    const claimToFirstCommandMs: number[] = [];
    for (const id of ids) {
      const spec: WorkspaceSpec = {
        tenantId: "bench",
        userId: "bench",
        agentId: "bench",
        workspaceId: `claim-${id}`,
        isolation: "per_agent",
      };
      specs.push(spec);
      // Another process' driver, as the API holds one: it has attached nothing yet.
      const api = dockerDriverOver(new DockerMachines(config, deps));
      let started = performance.now();
      const handle = await workers.bindIdleMachine!(id, { container: `berth-pool-${id}`, pool: id }, spec);
      const machine = await api.attach({ ...spec, handle });
      await machine.exec(["true"]);
      claimToFirstCommandMs.push(performance.now() - started);

      started = performance.now();
      await machine.exec(["true"]);
      bareExecMs.push(performance.now() - started);
    }
    return { bareExecMs, claimToFirstCommandMs };
  } finally {
    for (const spec of specs) await workers.purge(spec).catch(() => undefined);
    for (const id of ids) await workers.discardIdleMachine!(id, null).catch(() => undefined);
    await fs.rm(dataRoot, { recursive: true, force: true });
    await fs.rm(config.runtimeRoot, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const runs = process.argv[2] ? Number(process.argv[2]) : undefined;
  const { bareExecMs, claimToFirstCommandMs } = await measureDockerWarmClaim(runs ? { runs } : {});
  const format = (values: number[]) => values.map((value) => value.toFixed(1)).join(" ");
  const bare = median(bareExecMs);
  const claim = median(claimToFirstCommandMs);
  process.stdout.write(
    [
      `bare exec(["true"]) ms:          ${format(bareExecMs)}`,
      `claim → first command ms:        ${format(claimToFirstCommandMs)}`,
      `p50 bare exec:                   ${bare.toFixed(1)} ms`,
      `p50 claim → first command:       ${claim.toFixed(1)} ms`,
      `ratio (target ≤ 1.5×):           ${(claim / bare).toFixed(2)}×`,
      "",
    ].join("\n"),
  );
}
