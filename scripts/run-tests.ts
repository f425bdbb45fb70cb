// `npm test`: every Vitest project, in streams that run side by side. One after another the suite takes
// over 30 minutes on a 2-core machine, and much of that is waiting (processes booting, containers, a
// browser), so four streams share the machine:
//   1. the multi-process and fault tests (`integration` under multiprocess/ and faults/);
//   2. the rest of `integration`;
//   3. `unit`, then the browser tests (`e2e`);
//   4. the Docker-backed projects (`docker`, `e2b`, `kubernetes`, `contract`).
// They share nothing a test of another reads: each Vitest run's global setup makes its own database and
// Redis key prefix, every test its own data directories, containers (labelled with its database's
// installation id) and ports. The one shared file tree is `.next`: several tests start Berth as `npm start`
// does, which builds the dashboard when `.next` is stale, so the build runs once here, before the streams.
// Every stream runs to its end even when another failed; the exit code is 1 when any did. With arguments
// (`npm test -- <file>`), it is plain `vitest run <arguments>`.
import { spawn } from "node:child_process";
import path from "node:path";
import { buildState, nextBuild } from "./services/next-build";

const vitest = (args: string[]) =>
  new Promise<number>((resolve) => {
    const child = spawn("npx", ["vitest", "run", ...args], { stdio: "inherit" });
    child.on("exit", (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
const projects = (...names: string[]) => names.flatMap((name) => ["--project", name]);
const FAULT_FOLDERS = ["test/integration/multiprocess/", "test/integration/faults/"];

const args = process.argv.slice(2);
if (args.length > 0) process.exit(await vitest(args));

const root = path.resolve(import.meta.dirname, "..");
if ((await buildState(root)) !== "fresh") await nextBuild(root, process.env);

const codes = await Promise.all([
  vitest([...projects("integration"), ...FAULT_FOLDERS]),
  vitest([...projects("integration"), ...FAULT_FOLDERS.flatMap((folder) => ["--exclude", `${folder}**`])]),
  vitest(projects("unit")).then(async (unit) => [unit, await vitest(projects("e2e"))]),
  vitest(projects("docker", "e2b", "kubernetes", "contract")),
]);
process.exit(codes.flat().some((code) => code !== 0) ? 1 : 0);
