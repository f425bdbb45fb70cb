// What `npm test` reads back from the JSON reports its Vitest runs write (one per run, named after it):
// each file's time, to rebalance the streams by, and what failed, printed last because CI keeps only the
// tail of the output and a failure scrolls out of it among four streams' lines.
import { readFile } from "node:fs/promises";
import path from "node:path";
import { stripVTControlCharacters } from "node:util";

type JsonReport = {
  testResults?: {
    name: string;
    startTime: number;
    endTime: number;
    status: string;
    message?: string;
    assertionResults?: { fullName: string; status: string; failureMessages?: string[] }[];
  }[];
};

export type TestReports = { dir: string; root: string };

const readReport = async (reports: TestReports, run: string): Promise<JsonReport | undefined> => {
  const text = await readFile(path.join(reports.dir, `${run}.json`), "utf8").catch(() => undefined);
  return text === undefined ? undefined : (JSON.parse(text) as JsonReport);
};

/** The slowest files across the runs, one line each: seconds, path and run. */
export async function slowestFiles(reports: TestReports, runs: string[], count: number): Promise<string[]> {
  const files: { file: string; seconds: number }[] = [];
  for (const run of runs)
    for (const result of (await readReport(reports, run))?.testResults ?? [])
      files.push({
        file: `${path.relative(reports.root, result.name)} (${run})`,
        seconds: (result.endTime - result.startTime) / 1000,
      });
  return files
    .sort((a, b) => b.seconds - a.seconds)
    .slice(0, count)
    .map(({ file, seconds }) => `${seconds.toFixed(0).padStart(6)} s  ${file}`);
}

const EXCERPT_LINES = 8;
const excerpt = (message: string) =>
  stripVTControlCharacters(message)
    .split("\n")
    // Frames inside Vitest and other packages say nothing about the failure; the test's own frames do.
    .filter((line) => line.trim() !== "" && !line.includes("/node_modules/"))
    .slice(0, EXCERPT_LINES)
    .map((line) => `      ${line}`);

/** What failed in a run that exited non-zero, from its report; a run without one (it crashed) says so. */
export async function failures(reports: TestReports, run: { name: string; code: number }): Promise<string[]> {
  const report = await readReport(reports, run.name);
  if (!report) return [`  ${run.name}: exited ${run.code} without writing its report`];
  const lines: string[] = [];
  for (const file of report.testResults ?? []) {
    const where = path.relative(reports.root, file.name);
    const failed = (file.assertionResults ?? []).filter((test) => test.status === "failed");
    for (const test of failed)
      lines.push(`  ${where} > ${test.fullName}`, ...excerpt(test.failureMessages?.[0] ?? ""));
    // A file that failed outside its tests: a hook, an import, a suite that did not collect.
    if (failed.length === 0 && file.status === "failed")
      lines.push(`  ${where}`, ...excerpt(file.message ?? ""));
  }
  // Vitest also exits 1 for an unhandled error or rejection while every test passed.
  if (lines.length === 0)
    lines.push(`  ${run.name}: every test passed; look above for Vitest's "Unhandled Errors"`);
  return lines;
}
