import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import { captureCheckpoint } from "@/server/workspace/checkpoints/capture";
import { FolderCheckpointStore } from "@/server/workspace/checkpoints/checkpoint-store";
import {
  bareWalkAndCopy,
  type BenchMachine,
  folderBytes,
  localMachine,
  MB,
  tarOf,
  TENANT,
  tempDir,
  timed,
  writeTree,
} from "./checkpoint-support";
import { median, result, type BenchResult } from "./lib";

/**
 * Turn checkpoints (issue 24) on the `local` backend (bubblewrap), each figure against a baseline of the same
 * run:
 * - a capture after k = 3 changed files in workspaces of n = 10k and n = 100k files vs the least such a
 *   capture can do: a bare stat walk (`find` through the machine) plus copying the 3 files out; the cost
 *   must follow k, not n: capture(100k) / capture(10k) against the same ratio of the bare walks;
 * - the capture's p50 at n = 10k against a 100 ms budget;
 * - storage: 100 turns each changing one file of a 100 MB (10k-file) workspace, the store's bytes vs the
 *   workspace's (target ≤ 1.1×: 110 MB).
 * `BERTH_BENCH_CHECKPOINT_N=10000` leaves out the n = 100k workspace (it takes about a minute to build).
 */
const K = 3;
const ROUNDS = 15;
const TURNS = 100;
const SIZES = (process.env.BERTH_BENCH_CHECKPOINT_N ?? "10000,100000")
  .split(",")
  .map(Number)
  .filter((n) => n > 0);
/** 10 KiB files: the n = 10k workspace is the storage bench's 100 MB one; 1 KiB at n = 100k. */
const fileBytes = (n: number) => (n <= 10_000 ? 10 * 1024 : 1024);

type CaptureFigures = { n: number; captureMs: number; baselineMs: number; firstMs: number };

export async function run(): Promise<BenchResult[]> {
  const root = await tempDir("berth-bench-checkpoints-");
  try {
    const figures: CaptureFigures[] = [];
    let storage: { bytes: number; disk: number; workspace: number } | null = null;
    for (const n of SIZES) {
      const basedir = path.join(root, `ws-${n}`);
      await fs.mkdir(basedir);
      const local = await localMachine(basedir);
      if (typeof local === "string") {
        process.stdout.write(`  skipped: ${local}\n`);
        return [];
      }
      try {
        const paths = await populate(local, path.join(root, `host-${n}`), n, fileBytes(n));
        figures.push(await captureRounds(local, path.join(root, `store-${n}`), paths, root));
        if (n === 10_000) storage = await storageTurns(local, path.join(root, "store-turns"), paths);
      } finally {
        await local.close();
      }
    }
    return report(figures, storage);
  } finally {
    await fs.rm(root, { recursive: true, force: true });
  }
}

/** n files put into the machine with one archive (untimed); returns their paths. */
async function populate(local: BenchMachine, host: string, n: number, bytes: number): Promise<string[]> {
  await fs.mkdir(host);
  const paths = await writeTree(host, n, bytes);
  await local.machine.putArchive(".", tarOf(host));
  await fs.rm(host, { recursive: true, force: true });
  return paths;
}

async function changeFiles(local: BenchMachine, paths: readonly string[], k: number): Promise<string[]> {
  const changed = Array.from({ length: k }, () => paths[Math.floor(Math.random() * paths.length)]!);
  for (const file of changed) await local.machine.writeFile(file, randomBytes(512));
  return changed;
}

async function captureRounds(
  local: BenchMachine,
  storeRoot: string,
  paths: readonly string[],
  scratch: string,
): Promise<CaptureFigures> {
  const store = new FolderCheckpointStore(storeRoot);
  const capture = (previous: string | null) =>
    captureCheckpoint({ machine: local.machine, store, tenantId: TENANT, previous });
  let previous: string | null = null;
  const firstMs = await timed(async () => {
    previous = (await capture(null)).root;
  });
  const captureMs: number[] = [];
  const baselineMs: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const changed = await changeFiles(local, paths, K);
    const measureCapture = async () => {
      const start = performance.now();
      const captured = await capture(previous);
      captureMs.push(performance.now() - start);
      if (captured.stats.readFiles !== new Set(changed).size)
        throw new Error(`capture read ${captured.stats.readFiles} files, expected ${changed.length}`);
      previous = captured.root;
    };
    const measureBaseline = async () =>
      baselineMs.push(await bareWalkAndCopy(local.machine, changed, scratch));
    // Alternate which goes first: neither always finds the other's warm caches.
    if (round % 2) {
      await measureBaseline();
      await measureCapture();
    } else {
      await measureCapture();
      await measureBaseline();
    }
  }
  await fs.rm(storeRoot, { recursive: true, force: true });
  return { n: paths.length, captureMs: median(captureMs), baselineMs: median(baselineMs), firstMs };
}

/** A fresh store: the first checkpoint, then TURNS turns of one changed file each. */
async function storageTurns(
  local: BenchMachine,
  storeRoot: string,
  paths: readonly string[],
): Promise<{ bytes: number; disk: number; workspace: number }> {
  const store = new FolderCheckpointStore(storeRoot);
  let previous = (
    await captureCheckpoint({ machine: local.machine, store, tenantId: TENANT, previous: null })
  ).root;
  for (let turn = 0; turn < TURNS; turn++) {
    const file = paths[(turn * 7919) % paths.length]!;
    await local.machine.writeFile(file, randomBytes(10 * 1024));
    previous = (await captureCheckpoint({ machine: local.machine, store, tenantId: TENANT, previous })).root;
  }
  const used = await folderBytes(storeRoot);
  await fs.rm(storeRoot, { recursive: true, force: true });
  return { ...used, workspace: paths.length * fileBytes(paths.length) };
}

function report(
  figures: CaptureFigures[],
  storage: { bytes: number; disk: number; workspace: number } | null,
): BenchResult[] {
  const results: BenchResult[] = [];
  for (const figure of figures) {
    process.stdout.write(
      `  n=${figure.n}: first capture ${figure.firstMs.toFixed(0)} ms, p50 capture ${figure.captureMs.toFixed(1)} ms, bare walk + copy ${figure.baselineMs.toFixed(1)} ms\n`,
    );
    results.push(
      result({
        name: `checkpoints: capture after k=${K} changes, n=${figure.n / 1000}k files (p50)`,
        value: figure.captureMs,
        unit: "ms",
        baseline: `bare stat walk + copy of the ${K} files`,
        baselineValue: figure.baselineMs,
        target: { atMost: 1.5 },
      }),
    );
  }
  const small = figures.find((figure) => figure.n === 10_000);
  const large = figures.find((figure) => figure.n === 100_000);
  if (small) {
    results.push(
      result({
        name: "checkpoints: capture p50 at n=10k (absolute)",
        value: small.captureMs,
        unit: "ms",
        baseline: "a budget of 100 ms",
        baselineValue: 100,
        target: { atMost: 1 },
      }),
    );
  }
  if (small && large) {
    results.push(
      result({
        name: "checkpoints: capture growth n=100k / n=10k",
        value: large.captureMs / small.captureMs,
        unit: "×",
        baseline: "the bare stat walk's growth n=100k / n=10k",
        baselineValue: large.baselineMs / small.baselineMs,
        target: { atMost: 1.5 },
      }),
    );
  }
  if (storage) {
    results.push(
      result({
        name: `checkpoints: store after ${TURNS} one-file turns of a ${Math.round(storage.workspace / MB)} MB workspace`,
        value: storage.bytes / MB,
        unit: "MB",
        baseline: "the workspace's bytes (target 110 MB)",
        baselineValue: storage.workspace / MB,
        target: { atMost: 1.1 },
      }),
      result({
        name: "checkpoints: the same store on disk (blocks, informational)",
        value: storage.disk / MB,
        unit: "MB",
        baseline: "the workspace's bytes",
        baselineValue: storage.workspace / MB,
        goal: "≤ 1.25×",
      }),
    );
  }
  return results;
}
