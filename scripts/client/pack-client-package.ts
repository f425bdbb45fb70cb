import { execFile } from "node:child_process";
import fs from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { buildClientPackage } from "./build-client-package";

const run = promisify(execFile);
const REPO = path.resolve(import.meta.dirname, "../..");

/** The name a project installs and imports the client under (`import … from "berth-client"`). */
export const CLIENT_PACKAGE_NAME = "berth-client";

/**
 * What the client needs in the consumer's node_modules, pinned to the versions this repository runs:
 * `@trpc/client` and `superjson` are imported by the bundle; `@trpc/server`, `zod` and `@prisma/client` carry
 * the types of the procedures' inputs and outputs (without them those types degrade to `any`). The
 * declarations also mention server-side packages (BullMQ, dockerode, better-auth, …) through the router's
 * context; they are left out on purpose: no procedure's input or output uses them, `skipLibCheck` ignores
 * them, and installing them would pull the whole server (and native add-ons) into every consumer.
 */
const RUNTIME_DEPENDENCIES = ["@trpc/client", "superjson"] as const;
const TYPE_DEPENDENCIES = ["@trpc/server", "zod", "@prisma/client"] as const;

type RepoManifest = { version: string; dependencies: Record<string, string> };

/**
 * Writes the client as a package of its own into `packageDir` (emptied first): the bundle and declarations
 * of `buildClientPackage`, and a package.json with its name, version, `type: module`, `exports` and
 * `dependencies`, and no `scripts`, so installing it runs nothing (unlike installing this repository, whose
 * `postinstall` regenerates Prisma's client and makes the next `npm start` rebuild the dashboard).
 */
export async function writeClientPackage(packageDir: string): Promise<{ name: string; version: string }> {
  const repo = JSON.parse(await fs.readFile(path.join(REPO, "package.json"), "utf8")) as RepoManifest;
  await buildClientPackage(packageDir);
  const dependencies = Object.fromEntries(
    [...RUNTIME_DEPENDENCIES, ...TYPE_DEPENDENCIES].map((name) => {
      const version = repo.dependencies[name];
      if (!version) throw new Error(`package.json has no dependency ${name}, which the client needs`);
      return [name, version];
    }),
  );
  const manifest = {
    name: CLIENT_PACKAGE_NAME,
    version: repo.version,
    description: "Typed client of Berth's API (createBerthClient, chat.run)",
    license: "UNLICENSED",
    type: "module",
    exports: { ".": { types: "./index.d.ts", import: "./index.js" } },
    types: "./index.d.ts",
    files: ["index.js", "index.d.ts", "types/"],
    engines: { node: ">=20.19" },
    dependencies,
  };
  await fs.writeFile(path.join(packageDir, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);
  return { name: manifest.name, version: manifest.version };
}

/**
 * `writeClientPackage` into `<outDir>/package`, then `npm pack` of it into `outDir`: the tarball a project
 * installs with `npm install <path>/berth-client-<version>.tgz`. Returns the tarball's absolute path.
 */
export async function packClientPackage(outDir: string): Promise<string> {
  const packageDir = path.join(outDir, "package");
  await fs.mkdir(outDir, { recursive: true });
  await writeClientPackage(packageDir);
  return packWrittenClientPackage(packageDir, outDir);
}

/** `npm pack` of a folder `writeClientPackage` filled, into `outDir`; the tarball's absolute path. */
export async function packWrittenClientPackage(packageDir: string, outDir: string): Promise<string> {
  const { version } = JSON.parse(await fs.readFile(path.join(packageDir, "package.json"), "utf8")) as {
    version: string;
  };
  const tarball = path.join(outDir, `${CLIENT_PACKAGE_NAME}-${version}.tgz`);
  await fs.rm(tarball, { force: true });
  // --ignore-scripts: the package has none, and npm must not look for the repository's either.
  await run("npm", ["pack", "--ignore-scripts", "--silent", "--pack-destination", outDir], {
    cwd: packageDir,
  });
  await fs.access(tarball);
  return tarball;
}
