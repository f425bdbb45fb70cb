import { createHash } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";

/** The gateway as one self-contained file, ready to copy into a sandbox and run with `node`. */
export type GatewayBundle = {
  /** CommonJS source: CJS keeps bundled `require`s of Node builtins working in any Node ≥ 18. */
  code: string;
  /** Hex sha256 of `code`; part of the workspace image tag, so a gateway change rebuilds images. */
  sha256: string;
};

/** File name of the bundle, inside images and in `dist/`. */
export const GATEWAY_BUNDLE_FILE = "berth-gateway.cjs";
/** Debian bookworm ships Node 18; the bundle must run there. */
const GATEWAY_NODE_TARGET = "node18";

const sourceDir = path.dirname(fileURLToPath(import.meta.url));
const entryPoint = path.join(sourceDir, "server", "gateway-main.ts");

/** Where `npm run build:gateway` puts the prebuilt bundle (used when the TS sources are not shipped). */
export const DEFAULT_PREBUILT_GATEWAY = path.resolve(sourceDir, "../../../dist/gateway", GATEWAY_BUNDLE_FILE);

/** Bundles gateway-main.ts and everything it imports (MCP SDK, zod) with esbuild, in memory. */
async function bundleGateway(): Promise<GatewayBundle> {
  const esbuild = await import("esbuild");
  const result = await esbuild.build({
    entryPoints: [entryPoint],
    bundle: true,
    platform: "node",
    target: GATEWAY_NODE_TARGET,
    format: "cjs",
    write: false,
    minify: false,
    legalComments: "none",
    // Resolves the `@/` alias through tsconfig paths.
    tsconfig: path.resolve(sourceDir, "../../../tsconfig.json"),
    logLevel: "silent",
  });
  const output = result.outputFiles[0];
  if (!output) throw new Error("esbuild produced no gateway bundle");
  const code = output.text;
  return { code, sha256: sha256(code) };
}

let cached: Promise<GatewayBundle> | null = null;

/**
 * The bundle for this process, built once and memoised: from the TypeScript sources when they are present
 * (Berth runs its sources through tsx, so that is the normal case, and a stale prebuilt file can never
 * shadow an edited gateway), else from the prebuilt file written by `npm run build:gateway`.
 */
export function loadGatewayBundle(prebuiltPath: string = DEFAULT_PREBUILT_GATEWAY): Promise<GatewayBundle> {
  cached ??= fs.access(entryPoint).then(
    () => bundleGateway(),
    () => readGatewayBundle(prebuiltPath),
  );
  const pending = cached;
  pending.catch(() => {
    if (cached === pending) cached = null; // let a later call retry a failed build
  });
  return pending;
}

/** A prebuilt bundle file, as written by `npm run build:gateway`. */
export async function readGatewayBundle(file: string): Promise<GatewayBundle> {
  const code = await fs.readFile(file, "utf8");
  return { code, sha256: sha256(code) };
}

/** Writes the bundle to `outFile` (the build step behind `npm run build:gateway`). */
export async function writeGatewayBundle(outFile: string = DEFAULT_PREBUILT_GATEWAY): Promise<GatewayBundle> {
  const bundle = await bundleGateway();
  await fs.mkdir(path.dirname(outFile), { recursive: true });
  await fs.writeFile(outFile, bundle.code);
  return bundle;
}

function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}
