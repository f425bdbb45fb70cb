import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { bubblewrapDriver } from "@/server/workspace/drivers/bubblewrap/driver";
import {
  ZSandboxConfig,
  type TSandboxConfigInput,
} from "@/server/workspace/drivers/bubblewrap/sandbox-config";
import {
  instantiateDriver,
  type WorkspaceDriver,
  type WorkspaceSpec,
} from "@/server/workspace/drivers/driver";
import { IsolationPolicy } from "@/server/workspace/manager/isolation";

/**
 * A timing probe of the `local` driver's warm pool (not a `*.bench.ts`: it has no baseline ratio to hold,
 * it says what a claim costs next to a cold create). Each run times, in milliseconds:
 * - bare: one `exec(["true"])` on a machine attached already (the sandbox's own cost, paid by every command);
 * - claim: bindIdleMachine + attach + the first `exec(["true"])` of a machine createIdleMachine made before;
 * - cold: create + attach + the first `exec(["true"])`.
 * Claims and cold creates alternate (and take turns going first), so the host's load drifts over both alike.
 */
export type LocalWarmClaimOptions = {
  /** Timed runs of each kind (default 20). */
  runs?: number;
  /** Where the workspaces go (default: a fresh temporary folder, removed afterwards). */
  basedir?: string;
  sandbox?: TSandboxConfigInput;
};

export type LocalWarmClaimTimes = {
  bareExecMs: number[];
  claimToFirstCommandMs: number[];
  coldCreateToFirstCommandMs: number[];
};

export async function measureLocalWarmClaim(
  options: LocalWarmClaimOptions = {},
): Promise<LocalWarmClaimTimes> {
  const runs = options.runs ?? 20;
  const ownBasedir = !options.basedir;
  const basedir = await fs.realpath(
    options.basedir ?? (await fs.mkdtemp(path.join(os.tmpdir(), "berth-bench-local-pool-"))),
  );
  const config = ZSandboxConfig.parse(options.sandbox ?? {});
  const driver = instantiateDriver(bubblewrapDriver, config, {
    basedir,
    cwd: process.cwd(),
    uid: process.getuid?.() ?? -1,
  });
  const specs: WorkspaceSpec[] = [];
  const specOf = (workspaceId: string): WorkspaceSpec => {
    const spec = {
      workspaceId,
      tenantId: `bench-${workspaceId}`,
      userId: "bench-user",
      agentId: "",
      isolation: IsolationPolicy.PER_AGENT,
    };
    specs.push(spec);
    return spec;
  };
  const times: LocalWarmClaimTimes = {
    bareExecMs: [],
    claimToFirstCommandMs: [],
    coldCreateToFirstCommandMs: [],
  };
  try {
    // Untimed: what every process pays once (module loads, the cached system mounts, the first bwrap).
    const warmup = specOf("warmup");
    const warmupHandle = await driver.create(warmup);
    await firstCommand(driver, warmup, () => Promise.resolve(warmupHandle));

    for (let run = 0; run < runs; run++) {
      const poolId = `bench-pool-${run}`;
      const idle = await driver.createIdleMachine!(poolId);
      const claimed = specOf(`claimed-${run}`);
      const cold = specOf(`cold-${run}`);
      const claim = async () =>
        times.claimToFirstCommandMs.push(
          await firstCommand(driver, claimed, () => driver.bindIdleMachine!(poolId, idle, claimed)),
        );
      const create = async () =>
        times.coldCreateToFirstCommandMs.push(await firstCommand(driver, cold, () => driver.create(cold)));
      // Either goes first every other run: whichever follows the other's sandbox exit would be favoured.
      if (run % 2 === 0) await claim().then(create);
      else await create().then(claim);
    }

    const attached = await driver.attach({ ...warmup, handle: warmupHandle });
    try {
      for (let run = 0; run < runs; run++) {
        const started = performance.now();
        await attached.exec(["true"]);
        times.bareExecMs.push(performance.now() - started);
      }
    } finally {
      await driver.detach(attached);
    }
    return times;
  } finally {
    // Each workspace's memory cgroup goes with its stop.
    for (const spec of specs) await driver.stop(spec);
    if (ownBasedir) await fs.rm(basedir, { recursive: true, force: true });
  }
}

/** Milliseconds from `make` (bind or create) to the end of the machine's first `true`. */
async function firstCommand(
  driver: WorkspaceDriver,
  spec: WorkspaceSpec,
  make: () => Promise<Record<string, unknown>>,
): Promise<number> {
  const started = performance.now();
  const handle = await make();
  const machine = await driver.attach({ ...spec, handle });
  const result = await machine.exec(["true"]);
  const elapsed = performance.now() - started;
  await driver.detach(machine);
  if (result.exitCode !== 0) throw new Error(`true exited ${result.exitCode}: ${result.stderr.toString()}`);
  return elapsed;
}

function percentile(values: readonly number[], fraction: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(fraction * sorted.length) - 1)] ?? Number.NaN;
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const runs = Number(process.argv[2] ?? 20);
  const times = await measureLocalWarmClaim({ runs });
  for (const [name, values] of Object.entries(times)) {
    const p50 = percentile(values, 0.5).toFixed(1);
    const p99 = percentile(values, 0.99).toFixed(1);
    process.stdout.write(
      `${name.padEnd(28)} p50 ${p50.padStart(6)} ms   p99 ${p99.padStart(6)} ms   (${values.length} runs)\n`,
    );
  }
}
