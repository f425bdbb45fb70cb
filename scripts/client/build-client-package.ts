import { execFile } from "node:child_process";
import fs from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);
const REPO = path.resolve(import.meta.dirname, "../..");
const ENTRY = "server/client/index.ts";

/** What `buildClientPackage` wrote, relative to its output folder. */
export type ClientPackage = { js: string; types: string; declarationFiles: number };

/**
 * Builds the typed client for use outside this repository (`npm run build:client`): `index.js`, an ES
 * module bundled by esbuild with the `@/` alias resolved and the npm dependencies left as imports, and
 * `index.d.ts`, the declarations tsc emits for the client and the router types it carries, with every `@/`
 * specifier rewritten to a relative path (and relative specifiers given their `.js`, for `nodenext`
 * resolution), so a project type-checks them with no paths mapping. pack-client-package.ts adds the
 * package.json and packs it (`berth-client`).
 */
export async function buildClientPackage(outDir: string): Promise<ClientPackage> {
  await fs.rm(outDir, { recursive: true, force: true });
  const typesDir = path.join(outDir, "types");
  await fs.mkdir(typesDir, { recursive: true });
  await emitDeclarations(typesDir);
  const declarationFiles = await rewriteSpecifiers(typesDir);
  await bundle(path.join(outDir, "index.js"));
  const entryTypes = `./types/${ENTRY.replace(/\.ts$/, ".js")}`;
  await fs.writeFile(path.join(outDir, "index.d.ts"), `export * from "${entryTypes}";\n`);
  return { js: "index.js", types: "index.d.ts", declarationFiles };
}

async function emitDeclarations(typesDir: string): Promise<void> {
  const tsconfig = path.join(typesDir, "..", "tsconfig.client.json");
  await fs.writeFile(
    tsconfig,
    JSON.stringify({
      extends: path.join(REPO, "tsconfig.json"),
      compilerOptions: {
        noEmit: false,
        declaration: true,
        emitDeclarationOnly: true,
        incremental: false,
        outDir: typesDir,
        rootDir: REPO,
        plugins: [],
        typeRoots: [path.join(REPO, "node_modules", "@types")],
      },
      include: [],
      files: [path.join(REPO, ENTRY)],
    }),
  );
  try {
    await run(process.execPath, [path.join(REPO, "node_modules/typescript/bin/tsc"), "-p", tsconfig], {
      cwd: REPO,
      maxBuffer: 16 * 1024 * 1024,
    });
  } catch (error) {
    const output = (error as { stdout?: string }).stdout ?? "";
    throw new Error(`tsc could not emit the client's declarations:\n${output}`, { cause: error });
  } finally {
    await fs.rm(tsconfig, { force: true });
  }
}

const SPECIFIER = /(\bfrom\s+|\bimport\s*\(\s*|\bimport\s+)(["'])([^"']+)\2/g;

/** Points `@/x` at `x` in the emitted tree and gives relative specifiers the `.js` Node ESM expects. */
async function rewriteSpecifiers(typesDir: string): Promise<number> {
  const files = await declarationFilesIn(typesDir);
  const known = new Set(files);
  const resolve = (fromFile: string, specifier: string): string => {
    const fromDir = path.dirname(fromFile);
    const absolute = specifier.startsWith("@/")
      ? path.join(typesDir, specifier.slice(2))
      : specifier.startsWith(".")
        ? path.resolve(fromDir, specifier)
        : null;
    if (absolute === null) return specifier;
    const bare = absolute.replace(/\.(js|ts)$/, "");
    const target = known.has(`${bare}.d.ts`)
      ? `${bare}.js`
      : known.has(path.join(bare, "index.d.ts"))
        ? path.join(bare, "index.js")
        : null;
    if (target === null) {
      if (specifier.startsWith("@/")) throw new Error(`${fromFile}: no declarations for ${specifier}`);
      return specifier;
    }
    const relative = path.relative(fromDir, target).split(path.sep).join("/");
    return relative.startsWith(".") ? relative : `./${relative}`;
  };
  for (const file of files) {
    const text = await fs.readFile(file, "utf8");
    const rewritten = text.replace(
      SPECIFIER,
      (_match, lead: string, quote: string, specifier: string) =>
        `${lead}${quote}${resolve(file, specifier)}${quote}`,
    );
    if (rewritten !== text) await fs.writeFile(file, rewritten);
  }
  return files.length;
}

async function declarationFilesIn(dir: string): Promise<string[]> {
  const entries = await fs.readdir(dir, { recursive: true, withFileTypes: true });
  return entries
    .filter((entry) => entry.isFile() && entry.name.endsWith(".d.ts"))
    .map((entry) => path.join(entry.parentPath, entry.name));
}

async function bundle(outFile: string): Promise<void> {
  const esbuild = await import("esbuild");
  await esbuild.build({
    entryPoints: [path.join(REPO, ENTRY)],
    outfile: outFile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    // @trpc/client, superjson: the consumer's own dependencies, imported, not copied in.
    packages: "external",
    tsconfig: path.join(REPO, "tsconfig.json"),
    legalComments: "none",
    logLevel: "silent",
  });
}
