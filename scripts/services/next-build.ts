import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { readdir, readFile, stat, writeFile } from "node:fs/promises";
import path from "node:path";

// What a production build depends on. A change to any of these (path, size or mtime) means the
// existing .next is stale. Cheap: it stats files, it does not read them.
const SOURCE_DIRS = ["app", "server", "generated", "public", "lib", "components"];
const SOURCE_FILES = [
  "next.config.mjs",
  "proxy.ts",
  "package.json",
  "package-lock.json",
  "tsconfig.json",
  "postcss.config.mjs",
  "tailwind.config.ts",
];
const FINGERPRINT_FILE = "berth-build-fingerprint";

async function walk(root: string, dir: string, out: string[]): Promise<void> {
  const entries = await readdir(path.join(root, dir), { withFileTypes: true }).catch(() => []);
  for (const entry of entries) {
    const rel = path.join(dir, entry.name);
    if (entry.isDirectory()) await walk(root, rel, out);
    else if (entry.isFile()) out.push(rel);
  }
}

export async function sourceFingerprint(root: string): Promise<string> {
  const files: string[] = [...SOURCE_FILES];
  for (const dir of SOURCE_DIRS) await walk(root, dir, files);
  const hash = createHash("sha256");
  for (const rel of files.sort()) {
    const info = await stat(path.join(root, rel)).catch(() => undefined);
    if (info) hash.update(`${rel}\0${info.size}\0${info.mtimeMs}\n`);
  }
  return hash.digest("hex");
}

/** "missing", "stale" or "fresh": whether `.next` holds a production build of the current sources. */
export async function buildState(root: string): Promise<"missing" | "stale" | "fresh"> {
  const buildId = await stat(path.join(root, ".next", "BUILD_ID")).catch(() => undefined);
  if (!buildId) return "missing";
  const recorded = await readFile(path.join(root, ".next", FINGERPRINT_FILE), "utf8").catch(() => "");
  return recorded.trim() === (await sourceFingerprint(root)) ? "fresh" : "stale";
}

/** `next build`, output streamed through; records the fingerprint of the sources it built. */
export async function nextBuild(root: string, env: NodeJS.ProcessEnv): Promise<void> {
  const fingerprint = await sourceFingerprint(root);
  const cli = path.join(root, "node_modules", "next", "dist", "bin", "next");
  const child = spawn(process.execPath, [cli, "build"], { cwd: root, env, stdio: "inherit" });
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once("error", reject);
    child.once("exit", resolve);
  });
  if (code !== 0) throw new Error(`next build failed (exit ${code})`);
  await writeFile(path.join(root, ".next", FINGERPRINT_FILE), fingerprint + "\n");
}
