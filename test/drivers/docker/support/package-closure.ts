import { execFile } from "node:child_process";
import fs from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";

const execFileAsync = promisify(execFile);

/**
 * Copies an installed npm package and its whole production dependency closure (resolved the way Node
 * would from the package's own folder) into `targetRoot/node_modules`, so it runs inside a container
 * with no network. Returns the package's folder inside `targetRoot`.
 */
export async function copyPackageClosure(packageName: string, targetRoot: string): Promise<string> {
  const repoRoot = process.cwd();
  const seen = new Set<string>();
  const queue: Array<{ name: string; from: string }> = [{ name: packageName, from: repoRoot }];
  while (queue.length > 0) {
    const { name, from } = queue.shift()!;
    const dir = await resolvePackageDir(name, from, repoRoot);
    if (seen.has(dir)) continue;
    seen.add(dir);
    const manifest = JSON.parse(await fs.readFile(path.join(dir, "package.json"), "utf8")) as {
      dependencies?: Record<string, string>;
      optionalDependencies?: Record<string, string>;
    };
    for (const dep of Object.keys(manifest.dependencies ?? {})) queue.push({ name: dep, from: dir });
  }
  // Outer packages first: a nested node_modules comes along with its parent and is then skipped.
  const dirs = [...seen].sort((a, b) => a.length - b.length);
  const copied: string[] = [];
  for (const dir of dirs) {
    if (!copied.some((parent) => dir.startsWith(`${parent}${path.sep}`))) copied.push(dir);
  }
  await fs.mkdir(targetRoot, { recursive: true });
  // One cp(1) for the whole closure (--parents keeps each folder's path under the repository): about a
  // hundred folders, and a cp each took 10 s on a busy 2-core machine against 1 s for one. cp(1) is also an
  // order of magnitude faster than fs.cp for thousands of small files.
  await execFileAsync(
    "cp",
    ["-RL", "--parents", ...copied.map((dir) => path.relative(repoRoot, dir)), targetRoot],
    { cwd: repoRoot },
  );
  return path.join(targetRoot, "node_modules", packageName);
}

async function resolvePackageDir(name: string, from: string, stopAt: string): Promise<string> {
  let dir = from;
  for (;;) {
    const candidate = path.join(dir, "node_modules", name);
    try {
      await fs.access(path.join(candidate, "package.json"));
      return candidate;
    } catch {
      if (dir === stopAt || dir === path.dirname(dir)) throw new Error(`cannot resolve ${name} from ${from}`);
      dir = path.dirname(dir);
    }
  }
}
