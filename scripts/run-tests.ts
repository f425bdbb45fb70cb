// `npm test`: every Vitest project, in streams that run side by side. One after another the suite takes
// over 30 minutes on a 2-core machine, with a core often idle while a test waits for a process, a container
// or the browser; four streams side by side keep both cores busy (a rehearsal saw no idle time):
//   1. the multi-process and fault tests (`integration` under multiprocess/ and faults/, and the drivers'
//      test/drivers/<name>/integration/);
//   2. the rest of `integration`, then the `integration` tests that run Berth's commands as a user does
//      (`npm start`, `npm run berth`);
//   3. `unit`, then the browser tests (`e2e`);
//   4. the drivers' projects (`local`, `docker`, `e2b`, `kubernetes`, `contract`).
// They share nothing a test of another reads: each Vitest run's global setup makes its own database (on a
// given server, a copy of one template migrated here once: scripts/services/test-databases.ts) and Redis key
// prefix, every test its own data directories, containers (labelled with its database's
// installation id) and ports. The one shared file tree is `.next`: several tests start Berth as `npm start`
// does, which builds the dashboard when `.next` is stale, so the build runs once here, before the streams.
// Every stream runs to its end even when another failed; the exit code is 1 when any did. At the end it
// prints how long each stream took and the slowest files, the numbers to rebalance the streams by (CI's
// budget is 30 minutes), then every failed test with the start of its error (scripts/services/test-reports).
// With arguments (`npm test -- <file>`), it is plain `vitest run <arguments>`.
import { spawn } from "node:child_process";
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { buildState, nextBuild } from "./services/next-build";
import { dropDatabase, withDatabase } from "./services/database";
import { createTemplateDatabase, TEST_TEMPLATE_VARIABLE } from "./services/test-databases";
import { failures, slowestFiles } from "./services/test-reports";

const root = path.resolve(import.meta.dirname, "..");
const reportDir = path.join(root, "test-results", "streams");
const reports = { dir: reportDir, root };

const vitest = (args: string[]) =>
  new Promise<number>((resolve) => {
    const child = spawn("npx", ["vitest", "run", ...args], { stdio: "inherit" });
    child.on("exit", (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
const projects = (...names: string[]) => names.flatMap((name) => ["--project", name]);
// The drivers' own multi-process tests (test/drivers/<name>/integration/) run with the other multi-process ones.
const FAULT_FOLDERS = ["test/integration/multiprocess/", "test/integration/faults/", "test/drivers/"];
// After the rest of `integration`, which otherwise ends first (CI: 585 s against 703-817 s for the others,
// the drivers' 703 s before these 203 s made stream 4 the last at 906 s): the suite is CPU-bound on the 2-core
// machine (no idle time while four streams run), so what balances the streams is where the files go.
const COMMAND_TESTS = ["test/integration/start/", "test/integration/operator/cli.test.ts"];
// The drivers' projects (vitest.config.ts, test/drivers/<name>/).
const DRIVER_PROJECTS = ["local", "docker", "e2b", "kubernetes"];
const excluding = (paths: string[]) =>
  paths.flatMap((entry) => ["--exclude", entry.endsWith("/") ? `${entry}**` : entry]);

type Run = { name: string; args: string[] };
type Finished = { name: string; code: number; seconds: number };

/** Runs one after another; each run also writes Vitest's JSON report, named after it. */
async function stream(runs: Run[]): Promise<Finished[]> {
  const finished: Finished[] = [];
  for (const run of runs) {
    const started = Date.now();
    const report = path.join(reportDir, `${run.name}.json`);
    const code = await vitest([
      ...run.args,
      "--reporter=default",
      "--reporter=json",
      `--outputFile.json=${report}`,
    ]);
    finished.push({ name: run.name, code, seconds: Math.round((Date.now() - started) / 1000) });
  }
  return finished;
}

const args = process.argv.slice(2);
if (args.length > 0) process.exit(await vitest(args));

if ((await buildState(root)) !== "fresh") await nextBuild(root, process.env);
await mkdir(reportDir, { recursive: true });

const started = Date.now();
// On a given server (CI's), one migrated template the runs copy their databases from; dropped at the end.
const serverUrl = process.env.DATABASE_URL;
const template = serverUrl ? await createTemplateDatabase(serverUrl) : undefined;
if (template) process.env[TEST_TEMPLATE_VARIABLE] = template;
const streams = await Promise.all([
  stream([{ name: "integration-faults", args: [...projects("integration"), ...FAULT_FOLDERS] }]),
  stream([
    {
      name: "integration",
      args: [...projects("integration"), ...excluding([...FAULT_FOLDERS, ...COMMAND_TESTS])],
    },
    { name: "integration-commands", args: [...projects("integration"), ...COMMAND_TESTS] },
  ]),
  stream([
    { name: "unit", args: projects("unit") },
    { name: "e2e", args: projects("e2e") },
  ]),
  stream([{ name: "backends", args: projects(...DRIVER_PROJECTS, "contract") }]),
]).finally(async () => {
  if (serverUrl && template) await dropDatabase(withDatabase(serverUrl, template)).catch(() => undefined);
});

const runs = streams.flat();
console.log(`\nnpm test: ${Math.round((Date.now() - started) / 1000)} s after the build`);
for (const [index, finished] of streams.entries())
  console.log(
    `  stream ${index + 1}: ${finished.map((run) => `${run.name} ${run.seconds} s${run.code === 0 ? "" : " (FAILED)"}`).join(", then ")}`,
  );
console.log("slowest files (each file's time inside its run):");
for (const line of await slowestFiles(
  reports,
  runs.map((run) => run.name),
  15,
))
  console.log(`  ${line}`);
const failedRuns = runs.filter((run) => run.code !== 0);
if (failedRuns.length > 0) {
  console.log("failed:");
  for (const run of failedRuns) for (const line of await failures(reports, run)) console.log(line);
}
process.exit(failedRuns.length > 0 ? 1 : 0);
