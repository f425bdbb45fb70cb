import fs from "node:fs/promises";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { describeTarget, meetsTarget, type BenchModule, type BenchResult } from "./lib";

/**
 * Runs every `bench/*.bench.ts` (or only those whose file name contains an argument, e.g.
 * `npm run bench -- engine`), prints one table and writes `bench/results.json`.
 */
const benchDir = import.meta.dirname;
const filters = process.argv.slice(2);
const files = (await fs.readdir(benchDir))
  .filter((file) => file.endsWith(".bench.ts"))
  .filter((file) => filters.length === 0 || filters.some((filter) => file.includes(filter)))
  .sort();

const results: BenchResult[] = [];
for (const file of files) {
  process.stdout.write(`running ${file} ...\n`);
  const module = (await import(pathToFileURL(path.join(benchDir, file)).href)) as BenchModule;
  const started = Date.now();
  try {
    results.push(...(await module.run()));
  } catch (error) {
    process.stdout.write(
      `  FAILED: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exitCode = 1;
  }
  process.stdout.write(`  done in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
}

const format = (value: number) =>
  !Number.isFinite(value) ? String(value) : Math.abs(value) >= 100 ? value.toFixed(0) : value.toPrecision(3);
/** A target's outcome next to the ratio (`target ≤ 2×: met`), else the informational goal. */
const verdict = (r: BenchResult) =>
  r.target
    ? ` (target ${describeTarget(r.target)}: ${meetsTarget(r) ? "met" : "MISSED"})`
    : r.goal
      ? ` (goal ${r.goal})`
      : "";
const rows = results.map((r) => [
  r.name,
  `${format(r.value)} ${r.unit}`,
  `${format(r.baselineValue)} ${r.unit}`,
  `${format(r.ratio)}×${verdict(r)}`,
  r.baseline,
]);
const header = ["benchmark", "value", "baseline value", "ratio", "baseline"];
const widths = header.map((title, column) =>
  Math.max(title.length, ...rows.map((row) => row[column]!.length)),
);
const line = (cells: string[]) => cells.map((cell, column) => cell.padEnd(widths[column]!)).join(" | ");
process.stdout.write(`\n${line(header)}\n${widths.map((w) => "-".repeat(w)).join("-|-")}\n`);
for (const row of rows) process.stdout.write(`${line(row)}\n`);

const output = results.map(({ name, value, unit, baseline, baselineValue, ratio, target }) => ({
  name,
  value,
  unit,
  baseline,
  baselineValue,
  ratio,
  ...(target ? { target, met: meetsTarget({ ratio, target }) } : {}),
}));
await fs.writeFile(path.join(benchDir, "results.json"), `${JSON.stringify(output, null, 2)}\n`);
process.stdout.write(`\nwrote bench/results.json (${output.length} figures)\n`);

const missed = results.filter((r) => !meetsTarget(r));
if (missed.length > 0) {
  process.stdout.write(`\n${missed.length} target(s) missed:\n`);
  for (const r of missed) {
    process.stdout.write(`  ${r.name}: ${format(r.ratio)}× (target ${describeTarget(r.target!)})\n`);
  }
  process.exitCode = 1;
}

// The figures are written: end here. A bench that composed the whole app (its API, workers and queue
// clients, several times over in one process) can leave a Redis client still closing in the background,
// which would keep the runner alive with nothing left to do.
process.exit();
