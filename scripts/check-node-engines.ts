/**
 * `npm run check:engines` (part of `npm run check`): fails when an installed package declares `engines.node`
 * that excludes the running Node, the condition npm only warns about (EBADENGINE) and that would otherwise
 * surface later as a crash on a missing built-in. Reads the lockfile's record of every installed package.
 */
import { readFile } from "node:fs/promises";
import path from "node:path";
import semver from "semver";

/**
 * Packages whose declared range excludes Node 20 but that Berth never loads, each with the reason. Keep
 * this list short: an entry is a known EBADENGINE warning on install.
 */
export const UNUSED_ON_NODE_20: Readonly<Record<string, string>> = {
  // (prisma → @prisma/dev → @prisma/streams-local, which needs Node 22 and only `prisma dev` loads, is
  // replaced by scripts/stubs/prisma-streams-local through package.json's overrides: no warning on install.)
  // e2b's optional `undici8` alias (npm:undici@8): its loader picks it only on Node >= 22.19 and falls back
  // to undici 7 below that (dist/index.mjs, UNDICI_8_MIN_NODE). npm skips optional packages quietly.
  "node_modules/undici8": "an optional alias e2b loads only on Node >= 22.19 (undici 7 otherwise)",
};

export type EngineMismatch = { path: string; version: string; node: string };

/** Installed packages (from package-lock.json) whose `engines.node` excludes `nodeVersion`. */
export async function findEngineMismatches(
  repoRoot: string,
  nodeVersion = process.version,
): Promise<EngineMismatch[]> {
  const lock = JSON.parse(await readFile(path.join(repoRoot, "package-lock.json"), "utf8")) as {
    packages: Record<string, { version?: string; engines?: unknown }>;
  };
  const mismatches: EngineMismatch[] = [];
  for (const [where, info] of Object.entries(lock.packages)) {
    if (where === "" || Object.hasOwn(UNUSED_ON_NODE_20, where)) continue;
    const engines = info.engines;
    const node =
      engines && typeof engines === "object" && !Array.isArray(engines)
        ? (engines as { node?: unknown }).node
        : undefined;
    if (typeof node !== "string") continue;
    if (!semver.satisfies(nodeVersion, node, { includePrerelease: true })) {
      mismatches.push({ path: where, version: info.version ?? "?", node });
    }
  }
  return mismatches;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const repoRoot = path.resolve(import.meta.dirname, "..");
  const mismatches = await findEngineMismatches(repoRoot);
  for (const m of mismatches) {
    process.stderr.write(`${m.path}@${m.version} needs Node ${m.node}; this is ${process.version}\n`);
  }
  if (mismatches.length > 0) process.exit(1);
  process.stdout.write(`every installed package supports Node ${process.version}\n`);
}
