/**
 * `node --import tsx bundle-child.ts <entry.ts>`: bundles one child entry of the multi-process tests with
 * esbuild (Berth's own modules inlined, npm packages left to Node) into node_modules/.cache, named by the
 * bundle's hash, and prints the file's path. Under tsx a child compiled and loaded its few hundred modules
 * on every start, about 3 CPU-seconds, and the multi-process and fault tests start dozens of children on
 * a 2-core machine that runs four test streams; the bundle starts in about a third of that.
 *
 * A module's `import.meta.url` (the gateway bundler finds its sources by it, Prisma's client its folder)
 * stays the URL of its source file, not the bundle's.
 */
import { createHash } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { build, type Plugin } from "esbuild";

const root = path.resolve(import.meta.dirname, "../../..");
const entry = path.resolve(process.argv[2]!);

const sourceUrls: Plugin = {
  name: "source-import-meta",
  setup(plugin) {
    plugin.onLoad({ filter: /\.ts$/ }, async (args) => {
      if (args.path.includes(`${path.sep}node_modules${path.sep}`)) return undefined;
      const source = await fs.readFile(args.path, "utf8");
      if (!source.includes("import.meta")) return { contents: source, loader: "ts" };
      const url = pathToFileURL(args.path).href;
      return {
        contents: source
          .replaceAll("import.meta.url", JSON.stringify(url))
          .replaceAll("import.meta.dirname", JSON.stringify(path.dirname(args.path)))
          .replaceAll("import.meta.filename", JSON.stringify(args.path)),
        loader: "ts",
      };
    });
  },
};

// Split at dynamic imports, as Node loads a driver's operations (and with them its SDK) on first use: a
// single file would hoist every SDK's import to its top and load them all at each start.
const cache = path.join(root, "node_modules", ".cache", "berth-test-children");
const outdir = path.join(cache, "out");
const result = await build({
  entryPoints: [entry],
  bundle: true,
  splitting: true,
  outdir,
  outExtension: { ".js": ".mjs" },
  platform: "node",
  format: "esm",
  target: "node20",
  packages: "external",
  tsconfig: path.join(root, "tsconfig.json"),
  plugins: [sourceUrls],
  write: false,
  logLevel: "error",
});
const hash = createHash("sha256");
for (const file of result.outputFiles) hash.update(path.relative(outdir, file.path)).update(file.contents);
// Inside the project, so that Node resolves the bundle's npm imports from its node_modules; one folder per
// content, written whole under a temporary name and renamed, so a concurrent bundler never sees half of it.
const folder = path.join(cache, `${path.basename(entry, ".ts")}-${hash.digest("hex").slice(0, 16)}`);
const main = path.join(folder, `${path.basename(entry, ".ts")}.mjs`);
try {
  await fs.access(main);
} catch {
  const written = `${folder}.${process.pid}`;
  for (const file of result.outputFiles) {
    const target = path.join(written, path.relative(outdir, file.path));
    await fs.mkdir(path.dirname(target), { recursive: true });
    await fs.writeFile(target, file.contents);
  }
  await fs.rename(written, folder).catch(async (error: NodeJS.ErrnoException) => {
    // Another bundler renamed the same content first.
    await fs.rm(written, { recursive: true, force: true });
    if (error.code !== "ENOTEMPTY" && error.code !== "EEXIST") throw error;
  });
}
process.stdout.write(main);
