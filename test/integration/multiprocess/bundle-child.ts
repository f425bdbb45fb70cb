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

const result = await build({
  entryPoints: [entry],
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  packages: "external",
  tsconfig: path.join(root, "tsconfig.json"),
  plugins: [sourceUrls],
  write: false,
  logLevel: "error",
});
const code = result.outputFiles[0]!.contents;
const hash = createHash("sha256").update(code).digest("hex").slice(0, 16);
// Inside the project, so that Node resolves the bundle's npm imports from its node_modules.
const file = path.join(
  root,
  "node_modules",
  ".cache",
  "berth-test-children",
  `${path.basename(entry, ".ts")}-${hash}.mjs`,
);
await fs.mkdir(path.dirname(file), { recursive: true });
const written = `${file}.${process.pid}`;
await fs.writeFile(written, code);
await fs.rename(written, file);
process.stdout.write(file);
