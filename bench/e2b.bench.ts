import { randomBytes } from "node:crypto";
import { Sandbox } from "e2b";
import { type WorkspaceSpec } from "@/server/workspace/drivers/driver";
import { containersUnavailable, startE2b } from "./emulated-drivers";
import { median, result, type BenchResult } from "./lib";

/**
 * E2B workspaces through the driver against the loopback E2B emulator (test/fixtures/e2b-emulator), each
 * figure against the unmodified SDK doing the bare equivalent on the same emulator in the same run. The
 * emulator's sandboxes are local containers: these are Berth's protocol overhead over the SDK, NOT E2B's
 * cloud latencies.
 * - cold create → first command (provision: create, prepare, marker, gateway; attach; exec) vs
 *   `Sandbox.create` + `commands.run`;
 * - reattach → first command from a fresh driver (sandbox running, gateway kept) vs `Sandbox.connect` + run;
 * - resume after stop → first command (paused with memory; provision resumes and verifies) vs
 *   `Sandbox.connect` of a paused sandbox + run;
 * - one exec (`true`) through the backend (setsid wrapper, output relay) vs `commands.run("true")`.
 * Skipped, with the reason printed, when no engine or base image is available.
 */
const ROUNDS = 3;
const EXECS = 20;

export async function run(): Promise<BenchResult[]> {
  const unavailable = await containersUnavailable();
  if (unavailable) {
    process.stdout.write(`  skipped: ${unavailable}\n`);
    return [];
  }
  const e2b = await startE2b("berth-bench");
  const { emulator, newDriver } = e2b;
  const spec = (): WorkspaceSpec => ({
    workspaceId: `b${randomBytes(6).toString("hex")}`,
    tenantId: "bench",
    userId: "bench",
    agentId: "bench",
    isolation: "per_agent",
    handle: null,
  });
  try {
    // The gateway bundle and the image's first start, outside the timed parts.
    const warm = newDriver();
    const warmSpec = spec();
    await warm.purge({ ...warmSpec, handle: await warm.create(warmSpec) });

    const figures = {
      cold: [] as number[],
      bareCold: [] as number[],
      reattach: [] as number[],
      bareConnect: [] as number[],
      resume: [] as number[],
      bareResume: [] as number[],
      exec: [] as number[],
      bareExec: [] as number[],
    };
    for (let round = 0; round < ROUNDS; round++) {
      let start = performance.now();
      const bare = await Sandbox.create("base", emulator.connection);
      await bare.commands.run("true");
      figures.bareCold.push(performance.now() - start);

      const driver = newDriver();
      let workspace = spec();
      start = performance.now();
      workspace = { ...workspace, handle: await driver.create(workspace) };
      const backend = await driver.attach(workspace);
      await backend.exec(["true"]);
      figures.cold.push(performance.now() - start);

      figures.exec.push(await perCall(() => backend.exec(["true"])));
      figures.bareExec.push(await perCall(() => bare.commands.run("true")));
      await backend.close();

      start = performance.now();
      const connected = await Sandbox.connect(bare.sandboxId, emulator.connection);
      await connected.commands.run("true");
      figures.bareConnect.push(performance.now() - start);

      const fresh = newDriver();
      start = performance.now();
      const reattached = await fresh.attach(workspace);
      await reattached.exec(["true"]);
      figures.reattach.push(performance.now() - start);

      await fresh.detach(reattached);
      await fresh.stop(workspace);
      await Sandbox.pause(bare.sandboxId, emulator.connection);
      start = performance.now();
      const resumedBare = await Sandbox.connect(bare.sandboxId, emulator.connection);
      await resumedBare.commands.run("true");
      figures.bareResume.push(performance.now() - start);

      const later = newDriver();
      start = performance.now();
      workspace = { ...workspace, handle: await later.create(workspace) };
      const resumed = await later.attach(workspace);
      await resumed.exec(["true"]);
      figures.resume.push(performance.now() - start);

      await later.detach(resumed);
      await later.purge(workspace);
      await Sandbox.kill(bare.sandboxId, emulator.connection);
    }
    const label = "(emulator: protocol overhead only)";
    return [
      result({
        name: `e2b cold create → first command ${label}`,
        value: median(figures.cold),
        unit: "ms",
        baseline: "SDK Sandbox.create + commands.run on the emulator",
        baselineValue: median(figures.bareCold),
      }),
      result({
        name: `e2b reattach → first command ${label}`,
        value: median(figures.reattach),
        unit: "ms",
        baseline: "SDK Sandbox.connect + commands.run (running sandbox)",
        baselineValue: median(figures.bareConnect),
      }),
      result({
        name: `e2b resume after stop → first command ${label}`,
        value: median(figures.resume),
        unit: "ms",
        baseline: "SDK Sandbox.connect of a paused sandbox + commands.run",
        baselineValue: median(figures.bareResume),
      }),
      result({
        name: `e2b exec latency ${label}`,
        value: median(figures.exec),
        unit: "ms",
        baseline: "SDK commands.run('true')",
        baselineValue: median(figures.bareExec),
      }),
    ];
  } finally {
    await e2b.close();
  }
}

/** Milliseconds per sequential call (median of EXECS calls). */
async function perCall(fn: () => Promise<unknown>): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < EXECS; i++) {
    const start = performance.now();
    await fn();
    times.push(performance.now() - start);
  }
  return median(times);
}
