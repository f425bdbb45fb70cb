// `npm test`: every Vitest project, in two phases. Vitest runs projects whose files must run one at a time
// one after another, so the whole suite took about 26 minutes on a 2-core machine. The projects of the
// second phase share nothing a test of the other reads: the browser tests (`e2e`, Berth's local backend in
// its own database, data directory and key prefix) and the Docker-backed projects (`docker`, `e2b`,
// `kubernetes`, `contract`, each test with its own containers), so they run side by side. Every phase runs
// even when an earlier one failed; the exit code is 1 when any did. With arguments (`npm test -- <file>`),
// it is plain `vitest run <arguments>`.
import { spawn } from "node:child_process";

const vitest = (args: string[]) =>
  new Promise<number>((resolve) => {
    const child = spawn("npx", ["vitest", "run", ...args], { stdio: "inherit" });
    child.on("exit", (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
const projects = (...names: string[]) => names.flatMap((name) => ["--project", name]);

const args = process.argv.slice(2);
if (args.length > 0) process.exit(await vitest(args));

const codes = [await vitest(projects("unit", "integration"))];
codes.push(
  ...(await Promise.all([
    vitest(projects("e2e")),
    vitest(projects("docker", "e2b", "kubernetes", "contract")),
  ])),
);
process.exit(codes.some((code) => code !== 0) ? 1 : 0);
